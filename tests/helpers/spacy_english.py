"""spaCy's English tokenizer, the oracle of transforms.quality.english_words.

Run in a venv with spaCy (SPACY below; never the pipeline's), this script
prints, as one JSON line, the rules the pipeline reproduces spaCy's English
tokenizer and sentencizer from: the tokenizer's prefix, suffix, infix and URL
expressions, its special cases, the special cases its final matcher pass
looks for with the tokens they are found as, and the sentencizer's
sentence-ending characters. With `--write FILE` it writes them to FILE too (how
transforms/quality/english_words.json was made); with `--tokens FILE` (a JSON
list of texts) it prints each text's words as datatrove's English word
tokenizer returns them (spaCy's tokens, stripped, the empty ones left out)
and the number of sentences datatrove's split_into_sentences finds in it.
"""

from __future__ import annotations

import json
import sys

# The spaCy the rules were taken from (datatrove 0.10.1's English tokenizer).
SPACY = ("spacy==3.8.18",)


def rules(tokenizer, affix_tokens) -> dict:
    """The rules of a spaCy Tokenizer, as english_words.json holds them;
    `affix_tokens(text)`: the tokens the affix rules alone make of a text."""
    special = {text: [token[65] for token in tokens]  # 65: spacy.attrs.ORTH
               for text, tokens in tokenizer.rules.items()}
    # A special case holding an affix or a space is also looked for among the
    # tokens the affix rules make (spaCy's Tokenizer.add_special_case).
    matched = {text: affix_tokens(text)
               for text in special
               if tokenizer.find_prefix(text) or tokenizer.find_infix(text)
               or tokenizer.find_suffix(text) or " " in text}
    return {"spacy": __import__("spacy").__version__,
            "prefix": tokenizer.prefix_search.__self__.pattern,
            "suffix": tokenizer.suffix_search.__self__.pattern,
            "infix": tokenizer.infix_finditer.__self__.pattern,
            "url": tokenizer.url_match.__self__.pattern,
            "special": special, "matched": matched,
            # The characters that end a sentence for spaCy's sentencizer.
            "sentence_ends": sorted(__import__("spacy").pipeline.Sentencizer.default_punct_chars)}


def main(argv: list[str]) -> None:
    import spacy
    nlp = spacy.blank("en")
    tokenizer = nlp.tokenizer
    # A tokenizer without special cases makes a special case's tokens as
    # spaCy's Tokenizer._tokenize_affixes(text, False), which Python cannot call.
    bare = spacy.tokenizer.Tokenizer(nlp.vocab, prefix_search=tokenizer.prefix_search,
                                     suffix_search=tokenizer.suffix_search,
                                     infix_finditer=tokenizer.infix_finditer,
                                     url_match=tokenizer.url_match)
    if "--tokens" in argv:
        texts = json.load(open(argv[argv.index("--tokens") + 1], encoding="utf-8"))
        nlp.add_pipe("sentencizer")
        found = []
        for text in texts:
            with nlp.memory_zone():
                doc = nlp(text)
                found.append([[token.text.strip() for token in doc if token.text.strip()],
                              max(1, len(list(doc.sents)))])
        print(json.dumps(found))
        return
    table = rules(tokenizer, lambda text: [token.text for token in bare(text)])
    if "--write" in argv:
        with open(argv[argv.index("--write") + 1], "w", encoding="utf-8") as out:
            json.dump(table, out, ensure_ascii=False, indent=1, sort_keys=True)
            out.write("\n")
    print(json.dumps(table))


if __name__ == "__main__":
    main(sys.argv[1:])
