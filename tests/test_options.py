"""Flags: the original's command lines work; bad ones fail before any work."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from bert_pretraining_data.pipeline import options
from bert_pretraining_data.pipeline.beam_options import ConfigError, with_worker_requirements
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.options.masking import prediction_cap_warning
from bert_pretraining_data.pipeline.options.output import default_num_shards
from conftest import DATA, UNCASED_VOCAB

BASE = [f"--input_file={DATA / 'sample_text.txt'}", "--output_file=/tmp/never-written",
        f"--vocab_file={UNCASED_VOCAB}"]


def test_original_defaults():
    config, beam_args = parse_args(BASE)
    assert (config.do_lower_case, config.do_whole_word_mask, config.max_seq_length,
            config.max_predictions_per_seq, config.random_seed, config.dupe_factor,
            config.masked_lm_prob, config.short_seq_prob) == (
        True, False, 128, 20, 12345, 10, 0.15, 0.1)
    assert beam_args == []


@pytest.mark.parametrize("flags, lower, wwm", [
    (["--do_lower_case=False"], False, False),
    (["--do_lower_case=false", "--do_whole_word_mask"], False, True),
    (["--nodo_lower_case", "--do_whole_word_mask=True"], False, True),
    (["--do_lower_case", "true"], True, False),
    (["--do_lower_case", "false", "--nodo_whole_word_mask"], False, False),
    (["--do_lower_case=T", "--do_whole_word_mask=yes"], True, True),
])
def test_absl_boolean_spellings(flags, lower, wwm):
    config, _ = parse_args(BASE + flags)
    assert (config.do_lower_case, config.do_whole_word_mask) == (lower, wwm)


@pytest.mark.parametrize("flags, compression", [
    ([], None), (["--compression=gzip"], "gzip"), (["--gzip_compress"], "gzip"),
    (["--gzip_compress=false"], None), (["--gzip_compress", "--nogzip_compress"], None),
])
def test_compression_spellings(flags, compression):
    config, _ = parse_args(BASE + flags)
    assert config.compression == compression


def test_flag_set_is_unchanged():
    listed = (DATA / "create_pretraining_data_flags.txt").read_text().splitlines()
    expected = [line for line in listed if not line.startswith("#")]
    assert sorted(options.parser()._option_string_actions) == expected


def test_every_flag_is_grouped_and_states_its_default():
    ungrouped = []
    for group in options.parser()._action_groups:
        shown = [action for action in group._group_actions if action.help != argparse.SUPPRESS]
        if group.title in {section.SECTION[0] for section in options.GROUPS}:
            assert shown, group.title
            assert all("(default: " in action.help for action in shown), group.title
        else:  # argparse's own groups
            ungrouped += [action.dest for action in shown]
    assert ungrouped == ["help"]


def test_beam_options_pass_through():
    beam = ["--runner=DirectRunner", "--direct_num_workers=2", "--project=p",
            "--region=us-central1", "--temp_location=gs://b/tmp", "--setup_file=./setup.py",
            "--experiments=use_runner_v2"]
    _, beam_args = parse_args(BASE + beam)
    # ... followed by what --setup_file workers need (tests/test_dataflow.py)
    assert beam_args == with_worker_requirements(beam) and beam_args[:len(beam)] == beam


@pytest.mark.parametrize("flags, fragment", [
    (["--max_seq_length=4"], "--max_seq_length must be at least 5"),
    (["--masked_lm_prob=0"], "--masked_lm_prob must be in (0, 1]"),
    (["--masked_lm_prob=1.5"], "--masked_lm_prob must be in (0, 1]"),
    (["--max_predictions_per_seq=0"], "--max_predictions_per_seq must be at least 1"),
    (["--dupe_factor=0"], "--dupe_factor must be at least 1"),
    (["--short_seq_prob=-0.1"], "--short_seq_prob must be in [0, 1]"),
    (["--max_seq_length=abc"], "invalid int value"),
    (["--output_dir=/tmp/x"], "exactly one of --output_file"),
    (["--num_shards=3"], "applies to --output_dir only"),
    (["--ngram=3", "--max_ngram_size=3", "--do_whole_word_mask"], "give one"),
    (["--ngram=-1"], "--ngram must be at least 0"),
    (["--max_ngram_size=3"], "add --do_whole_word_mask"),
    (["--whole_word_segmenter=jieba"], "add --do_whole_word_mask"),
    (["--whole_word_segmenter=jieba", "--do_whole_word_mask", "--masking=none"],
     "drop --masking=none"),
    (["--next_sentence=none", "--reference_compatible"], "add --masking=none"),
    (["--next_sentence=mlm"], "argument --next_sentence: invalid choice"),
    (["--ngram=2", "--reference_compatible", "--random_seed=-1"], "in [0, 2**32)"),
    (["--reference_compatible", "--sentence_splitter=syntok"], "drop --sentence_splitter"),
    (["--held_out_masking=none"], "--held_out_masking applies with --validation_fraction or "
     "--test_fraction; add one"),
    (["--output_format=megatron", "--recipe=roberta"],
     "--recipe=roberta makes instances here; drop one"),
    (["--output_format=megatron", "--reference_compatible"],
     "--reference_compatible writes the original's records, not --output_format=megatron's"),
    (["--dupe_factr=5"], "unknown flag --dupe_factr: not a flag of this tool nor a Beam"),
    (["--runer", "DirectRunner"], "unknown flag --runer"),
])
def test_bad_flags_raise_one_line(flags, fragment):
    with pytest.raises(ConfigError) as err:
        parse_args(BASE + flags)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_default_shards_scale_with_input():
    assert default_num_shards(1000, 10) == 1
    assert default_num_shards(10 << 30, 10) == 800


@pytest.mark.parametrize("flags, fragment", [
    (["--max_seq_length=3"], "--max_seq_length must be at least 5"),
    ([f"--input_file={DATA / 'nothing-*.txt'}"], "matches no files"),
    ([f"--vocab_file={DATA / 'sample_text.txt'}"], "duplicate entry '' on lines 4 and 18"),
    ([f"--output_dir={DATA / 'sample_text.txt'}/out"], "cannot write to the output location"),
    (["--dupe_factr=2"], "unknown flag --dupe_factr"),
])
def test_cli_exits_2_with_one_line_and_writes_nothing(tmp_path, flags, fragment):
    out = tmp_path / "out"
    argv = [f"--input_file={DATA / 'sample_text.txt'}", f"--output_dir={out}",
            f"--vocab_file={UNCASED_VOCAB}", *flags]
    proc = subprocess.run([sys.executable, "-m", "bert_pretraining_data.pipeline", *argv],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("create-pretraining-data: error: ") and fragment in last
    assert not out.exists()


@pytest.mark.parametrize("extra, shuffle", [
    ([], "files"),  # Beam's default runner is the DirectRunner
    (["--runner=DirectRunner"], "files"),
    (["--runner=DataflowRunner"], "runner"),
    (["--runner=apache_beam.runners.dataflow.dataflow_runner.DataflowRunner"], "runner"),
    (["--runner=FlinkRunner"], "runner"),
    (["--runner=DataflowRunner", "--shuffle=files"], "files"),
    (["--shuffle=runner"], "runner"),
])
def test_shuffle_path_follows_the_runner_unless_asked(extra, shuffle):
    config, _ = parse_args(BASE + extra)
    assert config.shuffle == shuffle


@pytest.mark.parametrize("flags", [["--dedup_threshold=0.5", "--max_seq_length=3"],
                                   ["--max_seq_length=3", "--dedup_threshold=0.5"]])
def test_of_several_problems_the_earliest_groups_is_reported(flags):
    """Checks run group by group in the pipeline's order (input, dedup, ...,
    run), whatever the order of the flags: a fix at a time, from the top."""
    with pytest.raises(ConfigError, match=r"^--dedup_threshold and --dedup_ngram set "):
        parse_args(BASE + flags)
    with pytest.raises(ConfigError, match=r"^--max_seq_length must be at least 5"):
        parse_args(BASE + ["--num_shards=0", "--max_seq_length=3"])


def test_the_rules_between_groups_run_after_every_groups_checks():
    """A recipe's and --reference_compatible's rules (options/rules.py) read
    many groups; they come after the groups' own checks, as they did when the
    run group, the last, held them: a group's problem is said first."""
    with pytest.raises(ConfigError, match=r"^--recipe=roberta has no sentence-pair task"):
        parse_args(BASE + ["--recipe=roberta", "--next_sentence=sop"])
    with pytest.raises(ConfigError, match=r"^--max_seq_length must be at least 5"):
        parse_args(BASE + ["--recipe=roberta", "--next_sentence=sop", "--max_seq_length=3"])
    with pytest.raises(ConfigError, match=r"^--reference_compatible reproduces the original "
                       r"BERT script; drop it with --recipe=roberta"):
        parse_args(BASE + ["--reference_compatible", "--recipe=roberta", "--next_sentence=sop"])


@pytest.mark.parametrize("flags, shown", [
    ([], None),  # the original's 128 x 0.15 = 19.2 under its 20
    (["--max_seq_length=512", "--max_predictions_per_seq=80"], None),  # Google's 512 runs
    (["--max_seq_length=512"], "masks at most 3.9% of a full 512-token instance's tokens, not "
     "the --masked_lm_prob=0.15 asked; add --max_predictions_per_seq=77"),
    (["--next_sentence=none", "--masked_lm_prob=0.3", "--max_seq_length=1024",
      "--pack_sequences=True"], "masks at most 2.0% of a full 1024-token instance's tokens, not "
     "the --masked_lm_prob=0.3 asked; add --max_predictions_per_seq=308"),
    (["--max_seq_length=512", "--masking=none"], None),  # no masks made here
    (["--max_seq_length=512", "--recipe=roberta"], None),  # its cap is derived
])
def test_a_cap_under_the_masked_share_asked_is_said(flags, shown):
    """The drop-in default of 20 predictions stays, and a run whose cap keeps
    a full instance under --masked_lm_prob says so (issue 53: 2% masked where
    30% was asked, without a word)."""
    warning = prediction_cap_warning(parse_args(BASE + flags)[0])
    assert warning == (None if shown is None else f"--max_predictions_per_seq=20 {shown}")


def test_the_cap_warning_is_printed_and_kept_in_the_manifest(tmp_path, capsys):
    manifest = run([f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
                    f"--output_dir={tmp_path}", "--max_seq_length=256", "--progress=none"])
    warning = prediction_cap_warning(parse_args(BASE + ["--max_seq_length=256"])[0])
    assert warning in manifest["warnings"]
    assert f"create-pretraining-data: warning: {warning}" in capsys.readouterr().err
