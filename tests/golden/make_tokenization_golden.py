"""Generate golden WordPiece tokenizations from the ORIGINAL BERT tokenizer.

Why this exists: our pipeline reimplements BERT's tokenizer, and the only
trustworthy definition of "correct" is what google-research/bert's
tokenization.py actually outputs.  This script runs that original file (from a
separate checkout given by --bert_dir; it is never copied into this repository)
over real corpus lines plus hand-made adversarial Unicode lines, and records
FullTokenizer(...).tokenize(text) with do_lower_case=True and False, both with
the uncased vocabulary.  Tests compare our tokenizer against the output.

Output: JSON Lines, one {"source", "text", "lower", "cased"} object per line,
written with ensure_ascii=True so control characters and NUL survive intact.

    python tests/golden/make_tokenization_golden.py \
        --bert_dir /path/to/bert --out tests/data/tokenization_golden.jsonl
"""

import argparse
import collections
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared"))


def load_original_tokenization(bert_dir):
  """Imports bert_dir/tokenization.py with `tensorflow` aliased to tf.compat.v1."""
  import tensorflow
  sys.modules["tensorflow"] = tensorflow.compat.v1  # it only needs tf.gfile
  sys.path.insert(0, os.path.abspath(bert_dir))
  import tokenization  # pylint: disable=import-outside-toplevel
  return tokenization


def read_lines(path):
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f]


def wikitext_lines(path, count):
  """Every k-th non-empty line, so that about `count` lines are taken."""
  lines = [l.strip() for l in read_lines(path) if l.strip()]
  step = max(1, len(lines) // count)
  return lines[::step][:count]


def sample_text_lines(path):
  return [l.strip() for l in read_lines(path) if l.strip()]


def chinese_sentences(seed_glob, count):
  """Sentences (split after 。！？ and at newlines) that contain Han characters."""
  sentences = []
  for path in sorted(glob.glob(seed_glob)):
    with open(path, encoding="utf-8") as f:
      for para in f.read().splitlines():
        for s in re.split(r"(?<=[。！？])", para):
          s = s.strip()
          if re.search(r"[\u4e00-\u9fff]", s) and len(s) <= 300:
            sentences.append(s)
  sentences = list(dict.fromkeys(sentences))  # dedupe, keep order
  step = max(1, len(sentences) // count)
  return sentences[::step][:count]


def adversarial_lines():
  """(label, text) pairs; every non-ASCII character is written as an escape."""
  a = []
  for c in range(0x20):
    a.append(("adversarial:ascii_ctrl_%02x" % c, "ab%scd x%s" % (chr(c), chr(c))))
  a += [
      ("adversarial:del", "ab\x7fcd \x7f"),
      ("adversarial:c1_nel", "line\x85next"),
      ("adversarial:c1_all", "c1" + "".join(chr(c) for c in range(0x80, 0xa0)) + "end"),
      ("adversarial:nul_only", "\x00"),
      ("adversarial:replacement_char", "bad\ufffdbyte \ufffd"),
      ("adversarial:zero_width", "zw\u200bsp zw\u200cnj zw\u200dj \u200b"),
      ("adversarial:word_joiner", "word\u2060joiner"),
      ("adversarial:bom_start", "\ufeffhello world"),
      ("adversarial:bom_middle", "hello\ufeffworld"),
      ("adversarial:soft_hyphen", "co\u00adoperation \u00ad"),
      ("adversarial:line_para_sep", "one\u2028two\u2029three"),
      ("adversarial:nbsp", "100\u00a0km non\u00a0breaking"),
      ("adversarial:ideographic_space", "\u4e2d\u3000\u6587 a\u3000b"),
      ("adversarial:em_space_narrow_nbsp", "em\u2003space narrow\u202fnbsp"),
      ("adversarial:tabs_cr_vt_ff", "a\tb\rc\vd\fe\r\nf"),
      ("adversarial:accent_precomposed", "caf\u00e9 \u00c9cole \u00c5"),
      ("adversarial:accent_decomposed", "cafe\u0301 E\u0301cole A\u030a"),
      ("adversarial:angstrom", "\u00c5ngstr\u00f6m \u212b"),
      ("adversarial:naive_cafe_resume", "na\u00efve caf\u00e9 R\u00c9SUM\u00c9"),
      ("adversarial:greek_sigma", "\u039f\u0394\u039f\u03a3"),
      ("adversarial:greek_sisyphus", "\u03a3\u038a\u03a3\u03a5\u03a6\u039f\u03a3."),
      ("adversarial:greek_oso_alla", "\u038c\u03a3\u039f\u03a3,\u0391\u039b\u039b\u0386"),
      ("adversarial:turkish_i", "\u0130stanbul \u0131s\u0131k D\u0130YARBAKIR"),
      ("adversarial:german_sz", "Stra\u00dfe STRA\u1e9eE"),
      ("adversarial:ligature_fi", "\ufb01nal of\ufb01ce \ufb00"),
      ("adversarial:devanagari", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0939\u093f\u0928\u094d\u0926\u0940"),
      ("adversarial:arabic_harakat", "\u0627\u0644\u0633\u0651\u064e\u0644\u0627\u0645\u064f \u0639\u064e\u0644\u064e\u064a\u0652\u0643\u064f\u0645"),
      ("adversarial:hebrew", "\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd \u05e2\u05d5\u05dc\u05dd"),
      ("adversarial:thai", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a"),
      ("adversarial:hangul_precomposed", "\ud55c\uad6d\uc5b4 \uc548\ub155\ud558\uc138\uc694"),
      ("adversarial:hangul_jamo", "\u1112\u1161\u11ab\u1100\u116e\u11a8 \u3131\u314f"),
      ("adversarial:japanese_kana", "\u3072\u3089\u304c\u306a \u30ab\u30bf\u30ab\u30ca \uff76\uff80\uff76\uff85"),
      ("adversarial:cjk_basic", "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8"),
      ("adversarial:cjk_ext_a", "\u3400\u3401\u4db5"),
      ("adversarial:cjk_ext_b", "\U00020000\U0002a6d6"),
      ("adversarial:cjk_ext_c_d_e_f", "\U0002a700 \U0002b740 \U0002b820 \U0002ceb0"),
      ("adversarial:cjk_ext_glued", "a\U0002b820b\U0002ceb0c\U0002a6dfd"),  # Ext F is outside _is_chinese_char
      ("adversarial:cjk_compat", "\uf900\uf901 \U0002f800\U0002f801"),
      ("adversarial:cjk_punct", "\u4f60\u597d\uff0c\u4e16\u754c\u3002\u300c\u5f15\u7528\u300d\u3010\u62ec\u53f7\u3011\u3001\uff01\uff1f"),
      ("adversarial:fullwidth_ascii", "\uff21\uff22\uff23\uff11\uff12\uff13\uff01"),
      ("adversarial:emoji", "I \u2764\ufe0f NY \U0001f600\U0001f389"),
      ("adversarial:emoji_zwj", "family \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"),
      ("adversarial:emoji_skin_tone", "wave \U0001f44b\U0001f3fd"),
      ("adversarial:emoji_flags", "flags \U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5"),
      ("adversarial:emoji_keycap", "key 1\ufe0f\u20e3 #\ufe0f\u20e3"),
      ("adversarial:math", "\u2211 x \u2264 y \u00b1 1 \u221e\u2260\u221a"),
      ("adversarial:currency", "\u20ac5 \u00a310 \u00a5100 \u20b9200 $3.50"),
      ("adversarial:private_use", "pua\ue000 \U000f0000x"),
      ("adversarial:unassigned", "u\u0378 v\U0002fffe w"),
      ("adversarial:variation_selector", "star\u2b50\ufe0f text\ufe0e"),
      ("adversarial:word_99", "a" * 99),
      ("adversarial:word_100", "b" * 100),
      ("adversarial:word_101", "c" * 101),
      ("adversarial:word_199", "d" * 199),
      ("adversarial:word_200", "e" * 200),
      ("adversarial:word_201", "f" * 201),
      ("adversarial:word_200_punct", ("abc.def," * 25)),
      ("adversarial:word_250_accents", "\u00e9t\u00e9" * 83 + "x"),
      ("adversarial:word_150_decomposed", "e\u0301" * 150),  # 300 code points before accent stripping
      ("adversarial:special_tokens_alone", "[CLS] [SEP] [MASK] [UNK] [PAD]"),
      ("adversarial:special_tokens_glued", "foo[MASK]bar [mask] x[CLS] [SEP]y"),
      ("adversarial:hash_prefix", "##ing ## running ###"),
      ("adversarial:url", "see https://example.com/a_b?x=1&y=2#frag now"),
      ("adversarial:email", "mail john.doe+tag@example.co.uk today"),
      ("adversarial:number_separators", "1,234.56 and 1.234,56 and 10\u202f000"),
      ("adversarial:quotes", "it\u2019s \u2018quoted\u2019 \u201cdouble\u201d \u00abguillemets\u00bb don't \"x\""),
      ("adversarial:dashes", "well\u2010known 1990\u20132000 wait\u2014what"),
      ("adversarial:ellipsis", "and so\u2026 on..."),
      ("adversarial:mixed_scripts", "hello\u041c\u0438\u0440\u4e16\u754c"),
      ("adversarial:leading_trailing_ws", "  \t padded words \n "),
      ("adversarial:empty", ""),
      ("adversarial:whitespace_only", " \t\u3000\u00a0 \r\n"),
      ("adversarial:punct_only", "!?.,;:()[]{}<>\"'`~@#$%^&*-_=+/\\|"),
  ]
  words = ["the", "Caf\u00e9", "running", "\u4e2d\u6587", "1,234", "don't",
           "\u00dcber", "e-mail", "[MASK]", "\U0001f600", "xyzzy", "\u0130stanbul"]
  long_line = " ".join(words[i % len(words)] for i in range(1000))[:5000]
  a.append(("adversarial:very_long_line", long_line))
  return a


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--bert_dir", required=True, help="checkout of google-research/bert")
  p.add_argument("--out", required=True)
  p.add_argument("--vocab", default=os.path.join(HERE, "..", "data", "bert-base-uncased-vocab.txt"))
  p.add_argument("--wikitext", default=os.path.join(SHARED, "data", "corpora", "wikitext2_valid.txt"))
  p.add_argument("--sample_text", default=os.path.join(SHARED, "data", "corpora", "sample_text.txt"))
  p.add_argument("--seed_glob", default=os.path.join(SHARED, "seeds", "*.txt"))
  args = p.parse_args()

  tokenization = load_original_tokenization(args.bert_dir)
  lower = tokenization.FullTokenizer(args.vocab, do_lower_case=True)
  cased = tokenization.FullTokenizer(args.vocab, do_lower_case=False)

  items = [("wikitext2_valid", t) for t in wikitext_lines(args.wikitext, 300)]
  items += [("sample_text", t) for t in sample_text_lines(args.sample_text)]
  items += [("seeds_zh", t) for t in chinese_sentences(args.seed_glob, 100)]
  items += adversarial_lines()

  counts = collections.Counter()
  with open(args.out, "w", encoding="utf-8", newline="\n") as f:
    for source, text in items:
      rec = {"source": source, "text": text,
             "lower": lower.tokenize(text), "cased": cased.tokenize(text)}
      line = json.dumps(rec, ensure_ascii=True)
      assert json.loads(line)["text"] == text, source
      f.write(line + "\n")
      counts[source.split(":")[0]] += 1

  for kind, n in counts.items():
    print("%-16s %d" % (kind, n))
  print("%-16s %d" % ("total", sum(counts.values())))


if __name__ == "__main__":
  main()
