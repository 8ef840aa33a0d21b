"""The Beam half of a command line: the flags left to Beam's pipeline options.

A tool's parser takes its own flags and leaves the rest to Beam. Beam only logs
flags it does not know, so `split_known_args` refuses them; it also adds what
`--setup_file` workers need to install, and `runner_name` says which runner
the flags pick. `ConfigError`, a bad command line, is here as both halves raise it.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Sequence

# The pipeline's dependencies besides Beam, as ranges; setup.py's [pipeline] extra is built from it.
WORKER_REQUIREMENTS = pathlib.Path(__file__).with_name("worker_requirements.txt")
# The locks (make lock): per Python, the exact versions the .venv/ holds
# (venv-py3XX.txt) and, of those, what a Dataflow worker installs (workers-py3XX.txt).
LOCKS = pathlib.Path(__file__).with_name("locks")


class ConfigError(ValueError):
    """A flag problem; the message is one line that names the flag and the fix."""


def split_known_args(parser: argparse.ArgumentParser,
                     argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """This tool's flags and the Beam options; an unknown flag is an error."""
    args, beam_args = parser.parse_known_args(list(argv))
    unknown = unknown_flags(beam_args)
    if unknown:
        raise ConfigError(f"unknown flag {unknown[0].split('=')[0]}: not a flag of this "
                          "tool nor a Beam pipeline option; see --help")
    return args, with_worker_requirements(beam_args)


def unknown_flags(beam_args: Sequence[str]) -> list[str]:
    """Flags that no Beam PipelineOptions knows, which Beam would ignore.

    A typo (`--dupe_factr=5`) would otherwise run silently with the default.
    """
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

    parser = _BeamArgumentParser(allow_abbrev=False)
    for options_class in PipelineOptions.__subclasses__():
        options_class._add_argparse_args(parser)
    _, unknown = parser.parse_known_args(list(beam_args))
    return [arg for arg in unknown if arg.startswith("-")]


def requirement_lines(text: str) -> list[str]:
    """The requirements of a pip requirements file's text, comments dropped."""
    return [line.split("#")[0].strip() for line in text.splitlines()
            if line.split("#")[0].strip()]


def lock_path(kind: str, python: Sequence[int] = sys.version_info[:2]) -> pathlib.Path:
    """The lock of `kind` ("venv" or "workers") for a Python (major, minor)."""
    return LOCKS / f"{kind}-py{python[0]}{python[1]}.txt"


def locked_versions(path: pathlib.Path, python: Sequence[int] = sys.version_info[:2]
                    ) -> dict[str, str]:
    """A lock's pins, {canonical name: version}, for a Python (its markers applied)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    version = f"{python[0]}.{python[1]}"
    environment = {"python_version": version, "python_full_version": f"{version}.0"}
    pins = {}
    for line in requirement_lines(path.read_text(encoding="utf-8")):
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            (specifier,) = requirement.specifier
            pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def lock_differences(kind: str = "venv") -> dict[str, tuple[str | None, str | None]]:
    """{name: (locked, installed)} for each package that this environment and
    its Python's lock of `kind` do not hold at one version (the project aside):
    none in a locked install."""
    import importlib.metadata

    from packaging.utils import canonicalize_name

    installed = {canonicalize_name(d.metadata["Name"]): d.version
                 for d in importlib.metadata.distributions()}
    installed.pop("bert-pretraining-data", None)
    locked = locked_versions(lock_path(kind))
    return {name: (locked.get(name), installed.get(name))
            for name in sorted(locked.keys() | installed.keys())
            if locked.get(name) != installed.get(name)}


def with_worker_requirements(beam_args: Sequence[str]) -> list[str]:
    """The Beam flags, plus this package's worker dependencies when workers
    install it from `--setup_file`.

    Beam's workers pip-install the `--setup_file` package without extras, and
    the pipeline's dependencies sit behind the `[pipeline]` extra (so that a
    training environment can install the loaders alone). They travel as
    `--requirements_file=` the workers' lock of this Python instead, installed by
    each worker from PyPI (`--requirements_cache=skip`: not downloaded here and
    uploaded with the job): the versions CI tested, as the Flex Template image
    has them. A container image (`--sdk_container_image`) has them already.

    Raises:
        ConfigError: a `--requirements_file` of the user's lacks one of them.
    """
    from apache_beam.options.pipeline_options import (PipelineOptions, SetupOptions,
                                                      WorkerOptions)
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    options = PipelineOptions(list(beam_args))
    setup = options.view_as(SetupOptions)
    if not setup.setup_file or options.view_as(WorkerOptions).sdk_container_image:
        return list(beam_args)
    lock = lock_path("workers")
    if setup.requirements_file:
        with open(setup.requirements_file, encoding="utf-8") as f:
            theirs = {canonicalize_name(Requirement(line).name)  # pip's options aside
                      for line in requirement_lines(f.read()) if not line.startswith("-")}
        missing = [Requirement(line).name
                   for line in requirement_lines(WORKER_REQUIREMENTS.read_text())
                   if canonicalize_name(Requirement(line).name) not in theirs]
        if missing:
            raise ConfigError(
                f"--requirements_file={setup.requirements_file} lacks {missing[0]}: with "
                "--setup_file, workers get this package's dependencies from it; add the "
                f"lines of {lock}")
        return list(beam_args)
    cache = [] if setup.requirements_cache else ["--requirements_cache=skip"]
    return [*beam_args, f"--requirements_file={lock}", *cache]


def runner_name(beam_args: Sequence[str]) -> str:
    """The `--runner` of these Beam flags, by class name (a class path is
    cut to its last part); "" when unset, i.e. Beam's default DirectRunner."""
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    runner = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner or ""
    return str(runner).rsplit(".", 1)[-1]


def default_shuffle(beam_args: Sequence[str]) -> str:
    """The --shuffle these Beam flags call for: `files` on the DirectRunner
    (Beam's default runner), which holds a GroupByKey's input in memory;
    `runner` elsewhere."""
    runner = runner_name(beam_args)
    return "files" if not runner or "direct" in runner.lower() else "runner"


DATAFLOW_RUNNERS = ("DataflowRunner", "TestDataflowRunner")


def is_dataflow(beam_args: Sequence[str]) -> bool:
    """Whether these Beam flags select a Dataflow runner (by name or class path)."""
    return runner_name(beam_args) in DATAFLOW_RUNNERS
