"""--progress: a local run reports documents, instances, bytes, rate and ETA
while it runs, and its last line carries the run's final counts."""

from __future__ import annotations

import io

import pytest

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.pipeline import progress_printer
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.pipeline.progress_printer import progress_line
from bert_pretraining_data.transforms.progress_sink import ProgressSink, read_progress


def test_the_line_shows_the_share_rate_and_eta_of_each_phase():
    reading = progress_line({"bytes": 5_000_000, "documents": 1200}, total_bytes=20_000_000,
                            dupe_factor=10, elapsed=10.0, records_elapsed=0.0)
    assert reading == ("progress: reading 5.0 MB of 20.0 MB (25%), 1,200 documents, "
                       "0.50 MB/s, ETA 0:30")
    assert "ETA" not in progress_line({"bytes": 10}, total_bytes=None, dupe_factor=1,
                                      elapsed=1.0, records_elapsed=0.0)
    records = progress_line({"bytes": 20_000_000, "documents": 1250, "tokenized": 1200,
                             "copies": 3000,
                             "instances": 34_000}, total_bytes=20_000_000, dupe_factor=10,
                            elapsed=30.0, records_elapsed=10.0)
    assert records == ("progress: 1,250 documents read; records 25% of 12,000 document "
                       "copies, 34,000 instances, ETA 0:30")


def test_sinks_sum_across_writers(tmp_path):
    first, second = ProgressSink(str(tmp_path)), ProgressSink(str(tmp_path))
    first.add(documents=2, bytes=10)
    second.add(documents=3)
    first.add(instances=7)
    first.write()
    second.write()
    assert read_progress(str(tmp_path)) == {"documents": 5, "bytes": 10, "instances": 7}
    ProgressSink(None).add(documents=1)  # no directory: nothing written anywhere


@pytest.mark.slow
def test_a_run_reports_as_it_goes_and_ends_with_its_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(progress_printer, "LOG_SECONDS", 0.2)
    log = io.StringIO()
    real = progress_printer.reporting
    monkeypatch.setattr(progress_printer, "reporting",
                        lambda **kw: real(stream=log, live=False, **kw))
    corpus = DATA / "wikitext2_valid.txt"
    manifest = run([f"--input_file={corpus}", f"--vocab_file={UNCASED_VOCAB}",
                    f"--output_dir={tmp_path / 'out'}", "--dupe_factor=2"])
    lines = log.getvalue().splitlines()
    assert len(lines) >= 2, lines  # periodic lines, then the last one
    last = lines[-1]
    counters = manifest["counters"]
    assert f"{counters['documents']:,} documents read" in last
    assert f"records 100% of {2 * counters['tokenized_documents']:,} document copies" in last
    assert f"{manifest['total_instances']:,} instances" in last
    size = corpus.stat().st_size / 1e6
    assert any(f"of {size:,.1f} MB" in line for line in lines[:-1])


def test_progress_none_is_quiet(tmp_path, capsys):
    run([f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
         f"--output_dir={tmp_path / 'out'}", "--progress=none"])
    assert "progress:" not in capsys.readouterr().err
