"""The four command lines, declared one way: --help lists each tool's own flags
wherever it stands, and what a user can fix ends the tool in one line."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys

import pytest

from bert_pretraining_data.pipeline import create_vocab, inspect_data, main, options, refresh
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.command_line import BEAM_LOGGERS, quiet_beam_logs, run_command
from conftest import DATA

# (tool, its main, flags given before --help, the parser whose flags --help must list)
COMMANDS = {
    "create-pretraining-data": (main.main, ["--input_file=a.txt", "--dupe_factor=2"],
                                options.parser()),
    "create-pretraining-data-refresh": (refresh.main, ["--output_root=x", "--dupe_factor=2"],
                                        refresh.parser()),
    "create-vocab": (create_vocab.main, ["--input_file=a.txt", "--tokenization=SentencePiece"],
                     create_vocab.parser()),
    "inspect-pretraining-data": (inspect_data.main, ["out/", "--num_instances=3"],
                                 inspect_data.parser()),
}


def _shown_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions if action.help != argparse.SUPPRESS
            for flag in action.option_strings if flag.startswith("--")}


@pytest.mark.parametrize("prog", sorted(COMMANDS))
@pytest.mark.parametrize("before", [False, True], ids=["alone", "after-other-flags"])
def test_help_lists_the_tools_own_flags(prog, before, capsys):
    tool_main, flags, parser = COMMANDS[prog]
    with pytest.raises(SystemExit) as exit_:
        tool_main([*(flags if before else []), "--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"usage: {prog} ")
    listed = {word.rstrip(",") for word in shown.split() if word.startswith("--")}
    assert _shown_flags(parser) - {"--help"} <= listed
    assert len(_shown_flags(parser)) > 4


def test_the_refresh_help_lists_its_flags_and_the_runs():
    flags = _shown_flags(refresh.parser())
    assert {"--output_root", "--keep_versions", "--list_expired_versions"} <= flags
    assert _shown_flags(options.parser()) <= flags


def test_one_line_errors_and_exit_codes(capsys):
    class Failed(RuntimeError):
        pass

    def entry(argv):
        raise {"bad": ConfigError("--x is wrong; fix it"), "input": LookupError("no such input"),
               "failed": Failed("publishing failed; run again")}[argv[0]]

    for argv, code, line in [(["bad"], 2, "--x is wrong; fix it"),
                             (["input"], 2, "no such input"),
                             (["failed"], 1, "publishing failed; run again")]:
        with pytest.raises(SystemExit) as exit_:
            run_command("tool", entry, print, argv, user_errors=(LookupError,),
                        failed_runs=(Failed,))
        assert exit_.value.code == code
        assert capsys.readouterr().err == f"tool: error: {line}\n"
    with pytest.raises(ZeroDivisionError):  # a bug is not the user's to fix: its traceback
        run_command("tool", lambda argv: 1 / 0, print, [])


def test_beams_logged_traceback_of_a_reported_error_is_dropped():
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    logger = logging.getLogger(BEAM_LOGGERS[0])
    handler = Keep()
    logger.addHandler(handler)
    try:
        with quiet_beam_logs(lambda err: isinstance(err, ValueError)):
            for err in (ValueError("reported"), KeyError("a bug")):
                try:
                    raise err
                except Exception:
                    logger.exception("failed: %s", err)
        logger.error("after")
    finally:
        logger.removeHandler(handler)
    assert seen == ["failed: 'a bug'", "after"]


@pytest.mark.slow
@pytest.mark.parametrize("tokenization", ["WordPiece", "SentencePiece", "ByteLevelBPE"])
def test_create_vocab_on_an_empty_corpus_fails_in_one_line(tmp_path, tokenization):
    corpus = tmp_path / "empty.txt"
    corpus.write_text("\n\n")
    done = subprocess.run(
        [sys.executable, "-c", "from bert_pretraining_data.pipeline.cli import create_vocab; "
         "create_vocab()", f"--input_file={corpus}", f"--output_file={tmp_path / 'v' / 'out'}",
         f"--tokenization={tokenization}"], capture_output=True, text=True, cwd=DATA.parent.parent,
        timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("create-vocab: error: the corpus has no "), \
        done.stderr
    assert not (tmp_path / "v").exists() or not any((tmp_path / "v").iterdir())


# A tool's main, run by the command line in a fresh interpreter: what it saw
# while its module was imported and when it ran, and what was frozen at exit.
_PROCESS_PROBE = """
import atexit, gc, os, sys, types
seen = {}
# registered first, so run last: after the command line's own exit functions
atexit.register(lambda: print(seen["import"], seen["run"][0], seen["run"][1] > 0,
                              gc.get_freeze_count() > seen["run"][1]))
from bert_pretraining_data.pipeline import cli
def run():
    seen["run"] = gc.isenabled(), gc.get_freeze_count()
    seen["made"] = [[index] for index in range(1000)]  # objects the run leaves
def import_module(name):
    seen["import"] = gc.isenabled(), os.environ.get("OPENBLAS_NUM_THREADS"), "numpy" in sys.modules
    return types.SimpleNamespace(main=run)
cli.importlib.import_module = import_module
cli.create_pretraining_data()
"""


def test_the_command_line_imports_with_the_collector_off_and_freezes_what_lives_on():
    # Start-up and exit costs every run pays (docs/design-notes.md, pipeline.cli):
    # OpenBLAS's spinning threads, collections walking the imports' objects.
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", _PROCESS_PROBE], capture_output=True, text=True,
                          env=env, cwd=DATA.parent.parent, timeout=120)
    assert done.returncode == 0, done.stderr
    # Importing: the collector off, OpenBLAS's threads set before numpy is loaded.
    # Running: the collector on, the imports' objects frozen; at exit the run's too.
    assert done.stdout.split("\n")[0] == "(False, '1', False) True True True"
