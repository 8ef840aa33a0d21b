"""Smoke tests of the benchmark harness (bench/): its corpora and its stage
breakdown. No timing is asserted: figures depend on the machine."""

from __future__ import annotations

import collections
import pathlib

import pytest

from bench.corpus import MB, SHAPES, corpus_path, read_documents
from bench.document_hashes import stage_costs
from bench.kernel_cost import measure_round
from bench.pipeline import STAGES, Run, Usage, dedup_summary, stage_breakdown
from bench.workers import timed_runs
from conftest import DATA
from bert_pretraining_data.pipeline.main import run


def test_corpus_is_deterministic_and_of_the_requested_size(tmp_path: pathlib.Path):
    first = corpus_path(0.05, seed=3, cache_dir=tmp_path / "a")
    again = corpus_path(0.05, seed=3, cache_dir=tmp_path / "b")
    other_seed = corpus_path(0.05, seed=4, cache_dir=tmp_path / "c")

    data = first.read_bytes()
    assert again.read_bytes() == data
    assert other_seed.read_bytes() != data
    assert abs(len(data) - 0.05 * MB) <= 0.01 * 0.05 * MB
    source_lines = set((DATA / "wikitext2_valid.txt").read_bytes().split(b"\n"))
    assert set(data.split(b"\n")) <= source_lines


def test_corpus_repeats_every_document_evenly(tmp_path: pathlib.Path):
    source = tmp_path / "source.txt"
    source.write_text("alpha one.\nalpha two.\n\nbeta one.\n\n\ngamma one.\ngamma two.\n")
    size = 10 * len(source.read_bytes())

    data = corpus_path(size / MB, seed=0, sources=[source], cache_dir=tmp_path).read_bytes()

    assert size - len(b"alpha two.\n") <= len(data) <= size
    documents = [block for block in data.split(b"\n\n") if block.strip()]
    copies = collections.Counter(document.split()[0] for document in documents)
    assert set(copies) == {b"alpha", b"beta", b"gamma"}
    assert max(copies.values()) - min(copies.values()) <= 1  # whole shuffled rounds


def test_stage_breakdown_does_the_pipelines_work(tmp_path: pathlib.Path):
    corpus = corpus_path(0.05, seed=0, cache_dir=tmp_path / "cache")

    breakdown = stage_breakdown(corpus)

    assert tuple(breakdown.seconds) == STAGES
    assert all(spent >= 0 for spent in breakdown.seconds.values())
    manifest = run([f"--input_file={corpus}", f"--output_dir={tmp_path / 'out'}",
                    f"--vocab_file={DATA / 'bert-base-uncased-vocab.txt'}"])
    assert breakdown.instances == manifest["total_instances"] > 0
    assert breakdown.documents == manifest["counters"]["documents"]


def test_document_hash_costs_do_the_stages_work(tmp_path: pathlib.Path):
    corpus = corpus_path(0.05, shape="short", seed=0, cache_dir=tmp_path / "cache")
    costs = stage_costs(corpus)  # asserts that the comparison finds every document
    assert costs.pop("documents") == len(read_documents(corpus)) > 0
    assert set(costs) == {"hash", "sort+encode", "compare"}
    assert all(spent >= 0 for spent in costs.values())


def _runs(label: str, *cpu_seconds: float) -> list[Run]:
    return [Run(label, "web", 20.0, 1000, Usage(wall=cpu, user=cpu, system=0.0, minor_faults=0,
                                                major_faults=0, written=0, rss_sum=0, rss_max=0,
                                                load=0.0))
            for cpu in cpu_seconds]


def test_dedup_summary_compares_medians_of_repeated_runs():
    whole = {"none": _runs("none", 10.0, 30.0, 11.0), "exact": _runs("exact", 8.0, 9.0, 40.0)}
    on_kept = {"none": _runs("none", 8.0, 8.0, 9.0), "exact": _runs("exact", 8.4, 50.0, 8.1)}

    line = dedup_summary("exact", whole, on_kept, documents=200, kept=150)

    assert "kept 150 of 200 documents (25.0% removed)" in line
    assert "9.0 s vs 11.0 s without dedup" in line  # medians, not means or first runs
    assert "throughput 1.22x --dedup=none's" in line
    assert "8.4 s vs 8.0 s" in line and "the stage's cost +5.0%" in line


def test_shapes_have_the_document_lengths_they_promise(tmp_path: pathlib.Path):
    sentences = set()
    for name in ("wikitext2_valid.txt", "en_ewt-ud-dev.sentences.txt",
                 "en_ewt-ud-test.sentences.txt"):
        sentences |= set((DATA / name).read_bytes().split(b"\n"))
    sizes = {}
    for shape in SHAPES:
        path = corpus_path(0.3, shape=shape, seed=0, cache_dir=tmp_path)
        documents = [lines for _, lines in read_documents(path)]
        assert set(path.read_bytes().split(b"\n")) <= sentences  # real sentences only
        sizes[shape] = sorted(sum(len(line) + 1 for line in lines) for lines in documents)
        if shape == "short":
            assert {len(lines) for lines in documents} == {1, 2, 3, 4, 5}
        if shape == "tiny":
            assert {len(lines) for lines in documents} == {1, 2}
    median = {shape: values[len(values) // 2] for shape, values in sizes.items()}
    assert 1_500 < median["web"] < 2_700
    assert 70 < median["tiny"] < 140 < median["short"] < 500 < 5_000 < median["wikitext"]


def test_scale_model_counts_what_the_emulator_test_counts():
    from bench.scale_model import Job, model

    small, large = (model(Job(gigabytes=size, mean_document_bytes=600)) for size in (1, 16))
    for results in (small, large):
        runner, files = results["runner"], results["files"]
        # tests/test_gcs_requests.py: 2 objects per shard and 6 more, on the runner's shuffle.
        assert runner["GCS objects created"] == 2 * runner["shards"] + 6
        assert files["GCS objects created"] > 100 * runner["GCS objects created"]
        assert files["wall minutes"] > runner["wall minutes"]
    assert large["runner"]["instances"] == pytest.approx(16 * small["runner"]["instances"])
    longer = model(Job(gigabytes=1, mean_document_bytes=20_000))["runner"]
    assert longer["instances"] < small["runner"]["instances"]  # fewer instances per byte


def test_scale_model_splits_cpu_by_what_it_grows_with():
    from bench.scale_model import Job, model

    def parts(**job):
        runner = model(Job(gigabytes=100, mean_document_bytes=3000, **job))["runner"]
        split = {name.split()[-1]: value for name, value in runner.items()
                 if name.startswith("  of which")}
        assert sum(split.values()) == pytest.approx(runner["work vCPU-hours"])
        return runner, split

    base, split = parts()
    one, one_split = parts(dupe_factor=1, max_seq_length=512)
    # Reading and tokenizing do not shrink with the copies: at dupe 1 they lead.
    assert one_split["input"] == pytest.approx(split["input"])
    assert one_split["input"] > one_split["instances"] + one_split["output"]
    assert one_split["instances"] < split["instances"] / 5
    parquet, parquet_split = parts(output_format="parquet")
    assert parquet["output GB"] < base["output GB"] / 3
    assert parquet_split["instances"] == pytest.approx(split["instances"])


def test_shuffle_is_billed_by_dataflows_tiers():
    from bench.scale_model import PRICE_SHUFFLE_GB, shuffle_cost

    # Google's Dataflow training demo: 3.91 GB processed, 1,001 MB billed.
    assert shuffle_cost(3.91) / PRICE_SHUFFLE_GB == pytest.approx(0.9775)
    assert shuffle_cost(1024) / PRICE_SHUFFLE_GB == pytest.approx(250 * 0.25 + 774 * 0.5)
    assert shuffle_cost(6120) / PRICE_SHUFFLE_GB == pytest.approx(62.5 + 2435 + 1000)


def test_scale_model_prices_each_tokenizer_from_its_own_rates():
    from bench.scale_model import RATES_BY_TOKENIZER, Job, model

    job = dict(gigabytes=100, mean_document_bytes=3000, dupe_factor=1, max_seq_length=512)
    runs = {name: model(Job(**job, tokenizer=name))["runner"] for name in RATES_BY_TOKENIZER}
    assert set(runs) == {"wordpiece", "byte-level-bpe"}
    assert runs["wordpiece"]["work vCPU-hours"] != runs["byte-level-bpe"]["work vCPU-hours"]
    assert all(run["Shuffle GB"] > 0 and run["cost $"] > 0 for run in runs.values())


@pytest.mark.slow
def test_worker_timeline_times_the_runners_stages_and_its_workers(tmp_path: pathlib.Path):
    corpus = corpus_path(0.05, seed=0, cache_dir=tmp_path / "cache")

    (summary,), cores = timed_runs(corpus, 2)

    names = " ".join(name for name, _, _ in summary["stages"])
    assert "CreateInstances" in names and "WriteShard" in names
    assert all(0 <= began <= summary["wall"] and took >= 0
               for _, began, took in summary["stages"])
    assert len(summary["stops"]) == 2  # both worker processes, stopped after the stages
    last = max(began + took for _, began, took in summary["stages"])
    assert all(stopped >= last for stopped, _ in summary["stops"])
    assert summary["workers_cpu"] > summary["driver_cpu"] > 0
    assert cores.samples and all(0 <= busy <= 64 for _, busy in cores.samples)


def test_kernel_cost_writes_and_touches_then_leaves_nothing(tmp_path: pathlib.Path):
    measured = measure_round(tmp_path, 16 << 20)

    assert list(tmp_path.iterdir()) == []  # the file written is deleted
    assert measured.write >= 0 and measured.touch >= 0
    assert measured.write_wall > 0  # 16 MiB took some time to write
