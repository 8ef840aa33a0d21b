"""The tokenizer engine a tokenizer.json run takes on inputs read whole, and its CPU.

The engine check (pipeline/prepare.py: tokenizer_engine) encodes a sample of the input with
the fast engine and the `tokenizers` library; inputs that cannot be cut into windows
(compressed files, Parquet, WET files) are sampled from their first documents. Here a bench
shape's documents (bench/corpus.py) are written as those formats, and each is run with
`--tokenizer_engine=auto` and with the library, in turns, `--repeat` times (one worker,
bench/pipeline.py's run_ours: CPU seconds of the process tree). Printed: the engine each run
took, the median CPU of each and their ratio.

    python bench/input_engines.py --size 20 --tokenizer_json neox-nfc.json --repeat 3

(`python bench/tokenizer_families.py DIR` writes neox-nfc.json and the other families.)
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import statistics
import sys

sys.path[:0] = [str(pathlib.Path(__file__).resolve().parents[1])]  # for bench.*

from bench.corpus import corpus_path, read_documents  # noqa: E402
from bench.pipeline import run_ours  # noqa: E402

FORMATS = ("gzip", "parquet", "warc")


def written_as(corpus: pathlib.Path, input_format: str) -> pathlib.Path:
    """The corpus's documents in `input_format`, cached beside it."""
    suffix = {"gzip": ".txt.gz", "parquet": ".parquet", "warc": ".warc.wet.gz"}[input_format]
    path = corpus.with_name(corpus.stem + suffix)
    if path.exists():
        return path
    documents = [lines for _, lines in read_documents(corpus)]
    if input_format == "gzip":
        path.write_bytes(gzip.compress(corpus.read_bytes()))
    elif input_format == "parquet":
        import pyarrow
        import pyarrow.parquet as pq

        pq.write_table(pyarrow.table({"text": ["\n".join(lines) for lines in documents]}), path)
    else:
        from fastwarc import GzipWriter, WarcRecord, WarcRecordType

        writer = GzipWriter(str(path))
        for number, lines in enumerate(documents):
            record = WarcRecord()
            record.init_headers(WarcRecordType.conversion)
            record.headers["WARC-Target-URI"] = f"https://example.org/{number}"
            record.set_bytes_content("\n".join(lines).encode("utf-8"))
            record.write(writer)
        writer.close()
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=5.0, help="MB of the shape")
    parser.add_argument("--shape", default="web")
    parser.add_argument("--tokenizer_json", type=pathlib.Path, required=True)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    corpus = corpus_path(args.size, shape=args.shape)
    print(f"{'input':10}{'engine (auto)':16}{'auto CPU s':>12}{'library CPU s':>15}{'ratio':>8}")
    for input_format in args.formats.split(","):
        path = written_as(corpus, input_format)
        cpu: dict[str, list[float]] = {"auto": [], "tokenizers": []}
        engines = set()
        for _ in range(args.repeat):
            for engine in cpu:
                flags = (f"--tokenizer_file={args.tokenizer_json}", "--recipe=roberta",
                         f"--tokenizer_engine={engine}")
                run = run_ours(path, 1, flags=flags)
                cpu[engine].append(run.cpu)
                if engine == "auto":
                    engines.add(run.engine)
        auto, library = (statistics.median(cpu[engine]) for engine in cpu)
        print(f"{input_format:10}{','.join(sorted(map(str, engines))):16}{auto:>12.1f}"
              f"{library:>15.1f}{library / auto:>7.2f}x", flush=True)
    print(json.dumps({"shape": args.shape, "megabytes": args.size, "repeat": args.repeat}))


if __name__ == "__main__":
    main()
