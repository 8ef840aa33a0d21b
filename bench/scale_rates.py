"""The scale model's rates (bench/scale_model.py RATES_BY_TOKENIZER), measured
here, and its prediction checked against measured runs where it was not
calibrated.

Not a test: it prints tables and a RATES literal to paste. For each corpus
shape (N MB), with BERT-Base uncased's WordPiece or, given --tokenizer-json,
that file (byte-level BPE: a `create-vocab --tokenization=ByteLevelBPE` file):
- the pipeline's stages in one process (bench/pipeline.py stage_breakdown)
  at 128 and 512 tokens, TFRecord and Parquet, split by what each grows
  with: read, tokenize and sample with the text (per MB); create and mask
  with the instances (per instance at each length); sort, encode, frame and
  write with the rows and the output bytes (solved from the two lengths,
  per format); and instances per MB and bytes per instance (output, and the
  shuffle's entries);
- full runs (bench/pipeline.py run_ours, one worker, on the runner's shuffle
  as on Dataflow, TFRecord at 128): a near-empty run in each format is its
  start-up, and the driver's work that a larger input adds (the engine check
  and the codebook, a fixed cost) is timed in this process; a run at dupe 10
  and one at dupe 1 give what the runner adds
  beyond the stages, solved into a part per MB of text (its elements,
  reading) and a part per byte of the instances' shuffle entries (frames,
  shuffle); one more at dupe 1 with --dedup=exact, beside a run over the
  documents it keeps, gives dedup's CPU per MB;
- what goes through the shuffle (Dataflow Shuffle, billed by the byte): an
  instance's frame as a 750 GB job's small frames hold it, with a codebook
  learned from other documents (bench/shuffle_bytes.py), and per MB of text
  the tokenized batches (SpreadDocuments), the text batches waiting for the
  dedup decisions and the exact rows at 10,000 partitions
  (bench/document_shuffle_bytes.py); what zstd keeps is measured on the real
  text the shapes are made of, read once, as the shapes repeat it;
- the check: runs on M MB of each shape at --dupe_factor=1 --max_seq_length=512
  in both formats (never a calibration run's flags), and at --dupe_factor=10
  --max_seq_length=128 in Parquet (the C4-size job's flags; calibrated at 20 MB
  in TFRecord), on the runner's shuffle, without dedup (the shapes repeat
  their sources: dedup would drop most of them), beside the model's
  prediction; and the instances' measured shuffle bytes beside the model's (a
  large job's frames, so the model's are the larger).

    python bench/scale_rates.py --size 20 --check-size 50
    python bench/scale_rates.py --size 20 --check-size 50 --tokenizer-json bpe.json
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench import shuffle_bytes  # noqa: E402
from bench.corpus import SHAPES, WEB_SOURCES, corpus_path, read_documents  # noqa: E402
from bench.document_shuffle_bytes import (compressed_bytes, exact_bytes,  # noqa: E402
                                          exact_rows_coder, text_batches, tokenized_batches)
from bench.pipeline import kept_corpus, length_flags, run_ours, stage_breakdown  # noqa: E402
from bench.scale_model import (FORMATS, LENGTHS, ShapeRates, instances,  # noqa: E402
                                work_cpu_seconds)
from bert_pretraining_data.pipeline.options import parse_args  # noqa: E402
from bert_pretraining_data.pipeline.prepare import (entry_codebook_of,  # noqa: E402
                                                    tokenizer_engine)
from bert_pretraining_data.pipeline.stages import StageSettings  # noqa: E402
from bert_pretraining_data.transforms.dedup.decisions import (Fingerprints,  # noqa: E402
                                                              fingerprint_batch)
from bert_pretraining_data.transforms.handoff.compressed import CompressedList  # noqa: E402
from bert_pretraining_data.transforms.read.beam import match_inputs  # noqa: E402

MB = 1e6
INPUT_STAGES = ("read", "tokenize", "sample")
RUNNER = ("--shuffle=runner",)  # Dataflow's path, in every full run here
LARGE_JOB_SHARDS = 55_880  # 750 GB at dupe 10: its frames are the smallest we model
DEDUP_PARTITIONS = 10_000  # 640 GB: exact rows as a large job's elements hold them
# (dupe_factor, max_seq_length, format): the check's runs
CHECKS = ((1, 512, "tfrecord"), (1, 512, "parquet"), (10, 128, "parquet"))


def _format_flags(output_format: str) -> tuple[str, ...]:
    return () if output_format == "tfrecord" else (f"--output_format={output_format}",)


def _split(total: dict, first: dict, second: dict) -> tuple[float, float]:
    """(a, b) with total[k] = a * first[k] + b * second[k] for both keys,
    neither negative (a part the noise makes negative is taken as none)."""
    (t0, t1), (f0, f1), (s0, s1) = (list(d.values()) for d in (total, first, second))
    determinant = f0 * s1 - f1 * s0
    a, b = (t0 * s1 - t1 * s0) / determinant, (f0 * t1 - f1 * t0) / determinant
    if a < 0:
        return 0.0, (t0 + t1) / (s0 + s1)
    if b < 0:
        return (t0 + t1) / (f0 + f1), 0.0
    return a, b


def stage_rates(corpus: pathlib.Path, tokenizer: tuple[str, ...]) -> ShapeRates:
    """The stages' rates, from one in-process run per length and format (the
    runner's and the shuffle's parts left at zero: `runner_parts` and
    `shuffle_parts` measure them)."""
    megabytes = corpus.stat().st_size / MB
    documents = read_documents(corpus)
    runs = {(fmt, length): stage_breakdown(corpus, flags=(*length_flags(length),
                                                          *_format_flags(fmt), *tokenizer))
            for fmt in FORMATS for length in LENGTHS}
    dupe = 10  # bench/pipeline.py FLAGS
    output = {fmt: _split({n: runs[fmt, n].seconds["write"] for n in LENGTHS},
                          {n: runs[fmt, n].instances for n in LENGTHS},
                          {n: runs[fmt, n].output_bytes for n in LENGTHS}) for fmt in FORMATS}
    return ShapeRates(
        mean_document_bytes=round(corpus.stat().st_size / len(documents)),
        input_us_per_mb=round(statistics.mean(
            sum(run.seconds[s] for s in INPUT_STAGES) for run in runs.values())
            / megabytes * 1e6),
        dedup_us_per_mb=0.0,
        runner_us_per_mb=0.0,
        instances_per_mb={length: round(runs["tfrecord", length].instances / megabytes / dupe)
                          for length in LENGTHS},
        instance_us={length: round(statistics.mean(
            runs[fmt, length].seconds["records"] / runs[fmt, length].instances * 1e6
            for fmt in FORMATS), 2) for length in LENGTHS},
        runner_ns_per_entry_byte=0.0,
        output_us_per_row={fmt: round(output[fmt][0] * 1e6, 3) for fmt in FORMATS},
        output_ns_per_byte={fmt: round(output[fmt][1] * 1e9, 3) for fmt in FORMATS},
        entry_bytes={length: round(runs["tfrecord", length].entry_bytes
                                   / runs["tfrecord", length].instances) for length in LENGTHS},
        shuffled_entry_bytes=dict.fromkeys(LENGTHS, 0.0),
        document_shuffle_bytes_per_mb=0.0,
        dedup_shuffle_bytes_per_mb=0.0,
        bytes_per_instance={f"{fmt} {length}": round(
            runs[fmt, length].output_bytes / runs[fmt, length].instances)
            for fmt in FORMATS for length in LENGTHS})


def _predicted(rates: ShapeRates, corpus: pathlib.Path, **job) -> float:
    return sum(work_cpu_seconds(rates, megabytes=corpus.stat().st_size / MB, **job).values())


def driver_seconds(corpus: pathlib.Path, tokenizer: tuple[str, ...]) -> float:
    """CPU the driver spends on this input before any work beyond what it
    spends on a near-empty one: the engine check (a tokenizer.json's, on up to
    4 MiB) and learning the shuffle frames' codebook (on 1 MiB;
    pipeline/prepare.py). Fixed per run, so not a rate per MB."""
    def spent(path: pathlib.Path) -> float:
        config, _ = parse_args([f"--input_file={path}", "--output_dir=unused", "--shuffle=runner",
                                *(tokenizer or (f"--vocab_file={shuffle_bytes.VOCAB}",))])
        vocab = config.tokenizer.load_vocabulary()
        files = match_inputs(config.input_file)
        start = time.process_time()
        engine, _ = tokenizer_engine(config, [(config, files)], vocab)
        entry_codebook_of(config, StageSettings.of(config, vocab, engine), vocab, files)
        return time.process_time() - start

    empty = corpus_path(0.01, shape="web", seed=0)
    spent(corpus)  # loads what the first call loads (kernels, the engine)
    return max(0.0, spent(corpus) - spent(empty))


def runner_parts(rates: ShapeRates, corpus: pathlib.Path, start_up: float,
                 tokenizer: tuple[str, ...]) -> ShapeRates:
    """`rates` with the runner's parts, from full runs at dupe 10 and dupe 1 (128, TFRecord):
    per MB of text, and per byte shuffled (at 512 an instance's entry is 3x
    128's, and instances a third as many); and dedup's, from one more at dupe 1."""
    job = {"max_seq_length": 128, "output_format": "tfrecord"}
    megabytes = corpus.stat().st_size / MB
    start_up += driver_seconds(corpus, tokenizer)
    beyond, counts, measured = {}, {}, {}
    for dupe in (10, 1):
        measured[dupe] = run_ours(corpus, 1, flags=(f"--dupe_factor={dupe}", *RUNNER,
                                                    *tokenizer)).usage.cpu
        beyond[dupe] = measured[dupe] - start_up - _predicted(rates, corpus, dupe_factor=dupe,
                                                              **job)
        counts[dupe] = instances(rates, megabytes=megabytes, dupe_factor=dupe,
                                 max_seq_length=128) * rates.entry_bytes[128]
        print(f"  {corpus.name}: dupe {dupe}, 128: {measured[dupe]:.1f} CPU s, the runner's "
              f"{beyond[dupe]:.1f} s beyond start-up and stages", flush=True)
    per_mb, per_byte = _split(beyond, dict.fromkeys(beyond, megabytes), counts)
    # Dedup's own work: the run with it beside a run over the documents it
    # keeps (the shapes repeat their sources, so it drops many).
    deduplicated = run_ours(corpus, 1, flags=("--dupe_factor=1", "--dedup=exact", *RUNNER,
                                              *tokenizer)).usage.cpu
    kept, documents, kept_documents = kept_corpus(corpus, "exact")
    on_kept = run_ours(kept, 1, flags=("--dupe_factor=1", *RUNNER, *tokenizer)).usage.cpu
    print(f"  {corpus.name}: dupe 1, 128, --dedup=exact: {deduplicated:.1f} CPU s; without, "
          f"on the {kept_documents:,} of {documents:,} documents it keeps: {on_kept:.1f}",
          flush=True)
    return dataclasses.replace(rates, runner_us_per_mb=round(per_mb * 1e6),
                               runner_ns_per_entry_byte=round(per_byte * 1e9, 2),
                               dedup_us_per_mb=round(max(0.0, deduplicated - on_kept)
                                                     / megabytes * 1e6))


def _batches(documents: list, tokenizer: tuple[str, ...]) -> dict[str, list]:
    """The text batches that wait for the dedup decisions, and the tokenized
    batches of SpreadDocuments, of these documents."""
    config, _ = parse_args(["--input_file=unused", "--output_dir=unused",
                            *(tokenizer or (f"--vocab_file={shuffle_bytes.VOCAB}",))])
    return {"text": [CompressedList(fingerprint_batch(batch, Fingerprints(mode="exact"))[0])
                     for batch in text_batches(documents)],
            "tokenized": tokenized_batches(documents, config.tokenizer)}


def read_once_ratios(tokenizer: tuple[str, ...]) -> dict[str, float]:
    """What zstd leaves of each kind of batch on text read once (the shapes
    repeat their sources, which flatters it): bench/corpus.py's sources."""
    documents = [document for path in WEB_SOURCES for document in read_documents(path)]
    found = {}
    for kind, batches in _batches(documents, tokenizer).items():
        before, after, _ = compressed_bytes(batches)
        found[kind] = after / before
    return found


def frame_ratios(tokenizer: tuple[str, ...]) -> dict[tuple[str, int], float]:
    """What an instance's frame keeps of its entry's bytes in a large job's
    frames, with a codebook learned from other documents, by shape and
    length: measured on the real text read once each shape is made of
    (bench/shuffle_bytes.py, table 2), since the shapes repeat it."""
    sources = {name: (files, lines) for name, files, lines in shuffle_bytes.UNSEEN}
    text_of = {"wikitext": "WikiText-2 articles", "web": "EWT documents",
               "short": "EWT documents", "tiny": "EWT sentences"}
    found = {}
    for name in sorted(set(text_of.values())):
        for length in LENGTHS:
            entries, codebook = shuffle_bytes.unseen(
                *sources[name], length, tokenizer or (f"--vocab_file={shuffle_bytes.VOCAB}",))
            framed = shuffle_bytes.framed(
                entries, shuffle_bytes.job_frame_instances(entries, LARGE_JOB_SHARDS), codebook)
            found[name, length] = framed / (sum(map(len, entries)) / len(entries))
    return {(shape, length): found[name, length] for shape, name in text_of.items()
            for length in LENGTHS}


def shuffle_parts(rates: ShapeRates, corpus: pathlib.Path, shape: str,
                  tokenizer: tuple[str, ...], read_once: dict[str, float],
                  framed: dict[tuple[str, int], float]) -> ShapeRates:
    """`rates` with what goes through the shuffle: an instance's frame at each
    length as a large job frames it (its entry's bytes as the shape's, its
    frame's share as text read once); per MB of text, the tokenized batches,
    and the text batches with the exact rows (the batches' bytes as the
    shape's, compressed as text read once)."""
    megabytes = corpus.stat().st_size / MB
    documents = read_documents(corpus)
    plain = {kind: compressed_bytes(batches)[0] * read_once[kind]
             for kind, batches in _batches(documents, tokenizer).items()}
    _, _, rows = exact_bytes(text_batches(documents), DEDUP_PARTITIONS, exact_rows_coder())
    return dataclasses.replace(
        rates, shuffled_entry_bytes={length: round(rates.entry_bytes[length]
                                                   * framed[shape, length])
                                     for length in LENGTHS},
        document_shuffle_bytes_per_mb=round(plain["tokenized"] / megabytes),
        dedup_shuffle_bytes_per_mb=round((plain["text"] + rows) / megabytes))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=20, help="MB of each shape for the rates")
    parser.add_argument("--check-size", type=float, default=50,
                        help="MB of each shape for the check runs")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--tokenizer-json", type=pathlib.Path,
                        help="a byte-level BPE tokenizer.json in place of WordPiece")
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    tokenizer = ((f"--tokenizer_file={args.tokenizer_json.resolve()}",)
                 if args.tokenizer_json else ())
    empty = corpus_path(0.01, shape="web", seed=0)
    start_up = {fmt: statistics.median(run_ours(empty, 1, flags=(
        *_format_flags(fmt), *RUNNER, *tokenizer)).usage.cpu for _ in range(3))
        for fmt in FORMATS}
    print("start-up: " + ", ".join(f"{fmt} {cpu:.2f} CPU s" for fmt, cpu in start_up.items())
          + " (median of 3 runs on 10 KB; Parquet's imports pyarrow and polars)")
    read_once = read_once_ratios(tokenizer)
    print("zstd on text read once: " + ", ".join(f"{kind} batches {ratio:.3f}"
                                                 for kind, ratio in read_once.items()))
    framed = frame_ratios(tokenizer)
    print("an instance's frame in a large job, of its entry's bytes: " + ", ".join(
        f"{shape} {length} {ratio:.3f}" for (shape, length), ratio in framed.items()))
    rates = {}
    for shape in shapes:
        corpus = corpus_path(args.size, shape=shape, seed=0)
        rates[shape] = shuffle_parts(runner_parts(stage_rates(corpus, tokenizer), corpus,
                                                  start_up["tfrecord"], tokenizer),
                                     corpus, shape, tokenizer, read_once, framed)
    print(f"\nthe check, {args.check_size:g} MB, the runner's shuffle, no dedup (the shapes "
          "repeat their sources; rates as above; the first two flags never calibrated on):")
    print(f"{'shape':<10}{'flags':<20}{'measured CPU s':>15}{'predicted':>11}{'error':>8}"
          f"{'beyond start-up':>17}{'predicted':>11}{'error':>8}"
          f"  {'input / instances / output':<28}{'shuffled B/instance':>20}{'model':>7}")
    for shape in shapes:
        corpus = corpus_path(args.check_size, shape=shape, seed=0)
        for dupe, length, fmt in CHECKS:
            job = {"dupe_factor": dupe, "max_seq_length": length}
            parts = work_cpu_seconds(rates[shape], megabytes=corpus.stat().st_size / MB,
                                     output_format=fmt, dedup=False, **job)
            work = sum(parts.values())
            run = run_ours(corpus, 1, flags=(f"--dupe_factor={dupe}", *length_flags(length),
                                             *_format_flags(fmt), *RUNNER, *tokenizer))
            measured = run.usage.cpu
            shares = " / ".join(f"{value / work:.0%}" for value in parts.values())
            fixed = start_up[fmt] + driver_seconds(corpus, tokenizer)
            print(f"{shape:<10}{f'dupe {dupe}, {length}, {fmt}':<20}{measured:>15.1f}"
                  f"{fixed + work:>11.1f}{(fixed + work) / measured - 1:>+8.1%}"
                  f"{measured - fixed:>17.1f}{work:>11.1f}{work / (measured - fixed) - 1:>+8.1%}"
                  f"  {shares:<28}{run.counters['shuffle_entry_bytes'] / run.instances:>20.0f}"
                  f"{rates[shape].shuffled_entry_bytes[length]:>7}", flush=True)
    print("\nRATES = (")
    for rate in rates.values():
        print(_literal(rate))
    print(")")


def _literal(rate: ShapeRates, width: int = 99) -> str:
    """`rate` as a line of the RATES literal, wrapped at `width` columns."""
    lines, line = [], "    ShapeRates("
    indent = " " * len(line)
    fields = [f"{field.name}={getattr(rate, field.name)!r}" for field in dataclasses.fields(rate)]
    for i, text in enumerate(fields):
        text += ")," if i == len(fields) - 1 else ","
        if len(line) + len(text) + 1 > width and line.strip() != "ShapeRates(":
            lines.append(line.rstrip())
            line = indent
        if len(line) + len(text) > width and ", '" in text:  # a long dict: one item a cut
            head, _, rest = text.partition(", '")
            lines.append(line + head + ",")
            line = indent + " " * (head.index("{") + 1) + "'" + rest
            continue
        line += text if line.endswith("(") or line == indent else " " + text
    return "\n".join([*lines, line])


if __name__ == "__main__":
    main()
