"""create-pretraining-data-refresh: rebuild a dataset only when its corpus changed
(usage and the layout under --output_root: docs/refresh.md).

A refresh fingerprints its inputs (files' paths, sizes and modification
times, the vocabulary, the flags, the package versions); if LATEST's version
has the same fingerprint, nothing runs. Otherwise a new version is written,
then its fingerprint.json, then LATEST, renamed over its final name, so a
reader sees the old version or the new one, each complete, and LATEST only
moves forward. With --launch_only (the Flex Template) the job's own last steps
publish and move LATEST, and an unchanged corpus still submits a one-element
job, since a template launch must make a job.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import sys
import uuid
from typing import AbstractSet, Any, Callable, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.loaders.manifest import MANIFEST_NAME, DatasetManifest
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.changes import DocumentHistory, PreviousVersion, summary
from bert_pretraining_data.pipeline.command_line import (Check, FlagGroup, OneLineParser,
                                                         build_parser, check, flag,
                                                         run_command)
from bert_pretraining_data.pipeline.dataflow import check_dataflow_options, launch
from bert_pretraining_data.pipeline.local_runner import new_pipeline
from bert_pretraining_data.pipeline.main import create_dataset
from bert_pretraining_data.pipeline.options import GROUPS, Config, parse_args
from bert_pretraining_data.pipeline.prepare import (USER_ERRORS, RunFailed, read_filters,
                                                    read_mixture)
from bert_pretraining_data.pipeline.publish import PublishError, read_published, remove_tree
from bert_pretraining_data.pipeline.retention import apply_retention, release_lease, take_lease
from bert_pretraining_data.pipeline.run_manifest import package_versions
from bert_pretraining_data.pipeline.versions import (FINGERPRINT_NAME, LATEST_NAME, read_latest,
                                                     version_name)
from bert_pretraining_data.transforms.decontaminate.beam import match_benchmarks
from bert_pretraining_data.transforms.read.beam import match_inputs
from bert_pretraining_data.transforms.read.documents import comma_separated
from bert_pretraining_data.transforms.read.mixture import input_sources

PROG = "create-pretraining-data-refresh"
# Flags that say where the output goes, not what it holds.
_PLACEMENT_FLAGS = ("output_dir", "output_file", "overwrite")
# Flags naming a file whose content the fingerprint records in their place.
_CONTENT_FLAGS = ("quality_config",)


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What a dataset is built from, and the sha256 of it."""

    record: dict
    digest: str

    @classmethod
    def of(cls, record: dict) -> "Fingerprint":
        text = json.dumps(record, sort_keys=True, separators=(",", ":"))
        return cls(record=record, digest=hashlib.sha256(text.encode("utf-8")).hexdigest())


def input_states(input_file: str) -> list[dict]:
    """(path, bytes, updated) of every input file, sorted by path.

    match_inputs first: it fails in one line on a pattern that matches nothing.
    """
    match_inputs(input_file)
    patterns = comma_separated(input_file)
    states = {}
    for pattern in patterns:  # one per call, as match_inputs does
        for meta in FileSystems.match([pattern])[0].metadata_list:
            states[meta.path] = {"path": meta.path, "bytes": meta.size_in_bytes,
                                 "updated": meta.last_updated_in_seconds}
    return [states[path] for path in sorted(states)]


def fingerprint(config: Config) -> Fingerprint:
    """Reads the vocabulary (and the mixture and quality files) and lists the
    inputs and benchmark files (none is read)."""
    flags = {k: v for k, v in config.flags().items()
             if k not in _PLACEMENT_FLAGS + _CONTENT_FLAGS}
    mixture = read_mixture(config) if config.mixture else None
    record = {
        "inputs": input_states(",".join(source.input_file for source in mixture.sources)
                               if mixture else config.input_file),
        "vocab_sha256": (config.tokenizer.load_vocabulary(FileSystems.open).sha256
                         if config.tokenizer.path else None),  # --recipe=d2l computes it
        "flags": flags,
        "versions": package_versions(),
    }
    if mixture:  # the mixture file's content, not its path, says what the run makes
        record["mixture"] = mixture.to_json()
    filters = read_filters(config, input_sources(config, mixture), mixture)
    if filters:  # the thresholds --quality_config's file holds, not its path, for each source
        record["quality"] = [f.rules.thresholds if f.rules else None for f in filters]
    if config.decontaminate:  # new benchmark files change the output as new inputs do
        match_benchmarks(config.decontaminate)
        record["benchmarks"] = input_states(config.decontaminate)
    return Fingerprint.of(record)


def published_digest(root: str, version: str) -> str | None:
    """The fingerprint a published version was built from (None if unknown)."""
    path = FileSystems.join(root, version, FINGERPRINT_NAME)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        return json.loads(handle.read()).get("digest")


def _write_text(path: str, text: str) -> None:
    with FileSystems.create(path) as handle:
        handle.write(text.encode("utf-8"))


def promote(root: str, version: str, built_from: Fingerprint) -> str:
    """Records the fingerprint in the version (it is complete), then points
    LATEST at it, unless LATEST already names a newer version; returns the
    version LATEST names."""
    _write_text(FileSystems.join(root, version, FINGERPRINT_NAME),
                json.dumps({"digest": built_from.digest, **built_from.record}, indent=2,
                           sort_keys=True) + "\n")
    current = read_latest(root)
    if current is not None and current > version:
        logging.getLogger(__name__).warning(
            "%s was published, but LATEST stays on %s, published meanwhile by a refresh "
            "that started later", version, current)
        return current
    latest = FileSystems.join(root, LATEST_NAME)
    temporary = FileSystems.join(root, f".{LATEST_NAME}.{uuid.uuid4().hex}")
    _write_text(temporary, version + "\n")
    FileSystems.rename([temporary], [latest])
    return version


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a refresh found before doing anything."""

    root: str
    version: str
    output_dir: str
    fingerprint: Fingerprint
    latest: str | None
    latest_digest: str | None
    pipeline_argv: list[str]
    launch_only: bool
    history: DocumentHistory = DocumentHistory()  # the new version is compared with LATEST's
    keep_versions: int | None = None
    list_expired_versions: bool = False

    @property
    def unchanged(self) -> bool:
        return self.latest_digest == self.fingerprint.digest


def previous_version(root: str, latest: str | None) -> PreviousVersion | None:
    """The version LATEST names, as its manifest describes it (None before
    the first refresh, or if that version's manifest is gone)."""
    if latest is None:
        return None
    directory = FileSystems.join(root, latest)
    manifest_path = FileSystems.join(directory, MANIFEST_NAME)
    if not FileSystems.exists(manifest_path):
        return None
    return PreviousVersion.of(directory, read_published(manifest_path))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RefreshFlags(FlagGroup):
    """The refresh's own flags; every other flag is create-pretraining-data's."""

    SECTION = ("refresh", "the versions under --output_root, and which are kept")

    output_root: str | None = flag(
        "the directory that holds the versions and LATEST (local or gs://)", default=None,
        default_help="none; required")
    launch_only: bool = flag(
        "submit the job and return (the Flex Template's launch): the job itself publishes "
        "the version and moves LATEST", default=False)
    keep_versions: int | None = flag(
        "keep this many versions, the one LATEST names among them, and delete the older "
        "ones once LATEST has moved", default=None, default_help="none; keep every version")
    list_expired_versions: bool = flag(
        "with --keep_versions: list the versions it would delete, delete nothing and build "
        "nothing", default=False)

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        return [
            (bool(config.output_root), "--output_root is required: the directory that holds "
             "the versions and LATEST (local or gs://)"),
            (config.keep_versions is None or config.keep_versions >= 1, "--keep_versions must "
             "be at least 1 (the version LATEST names is always kept), got "
             f"{config.keep_versions}"),
            (not config.list_expired_versions or config.keep_versions is not None,
             "--list_expired_versions lists what --keep_versions would delete; add "
             "--keep_versions=N"),
        ]


def parser(*, with_run_flags: bool = True) -> OneLineParser:
    """The refresh's parser: its own flags and, `with_run_flags`, the run's
    (create-pretraining-data's), so that its --help lists both."""
    return build_parser(
        prog=PROG, groups=(RefreshFlags, *GROUPS) if with_run_flags else (RefreshFlags,),
        add_help=with_run_flags,
        usage="%(prog)s --output_root=... --input_file=... [--vocab_file=...] "
              "[--keep_versions=N] [create-pretraining-data flags] [Beam pipeline options]",
        description="Rebuild a dataset of create-pretraining-data under --output_root only "
                    "when its corpus, vocabulary or flags changed.")


def plan(argv: Sequence[str], *, now: datetime.datetime | None = None) -> Plan:
    """Validates every flag, fingerprints the inputs and reads LATEST; writes nothing."""
    parser().parse_known_args(list(argv))  # --help wherever it stands; any flag's bad value
    known, rest = parser(with_run_flags=False).parse_known_args(list(argv))
    flags = RefreshFlags(**vars(known))
    check(flags, (RefreshFlags,))
    for arg in rest:
        flag = arg.split("=", 1)[0].lstrip("-")
        if flag in _PLACEMENT_FLAGS or flag == "nooverwrite":
            raise ConfigError(f"--{flag} is chosen by the refresh (a new directory under "
                              "--output_root per version); drop it")
    root = flags.output_root.rstrip("/")
    # Validate with a stand-in directory: the version name needs the fingerprint.
    config, beam_args = parse_args([*rest, f"--output_dir={FileSystems.join(root, 'next')}"])
    check_dataflow_options(config, beam_args)
    current = fingerprint(config)
    latest = read_latest(root)
    version = version_name(now or datetime.datetime.now(datetime.timezone.utc),
                           current.digest, after=latest)
    output_dir = FileSystems.join(root, version)
    return Plan(root=root, version=version, output_dir=output_dir, fingerprint=current,
                latest=latest,
                latest_digest=published_digest(root, latest) if latest else None,
                pipeline_argv=[*rest, f"--output_dir={output_dir}"],
                launch_only=flags.launch_only,
                history=DocumentHistory(previous_version(root, latest)),
                keep_versions=flags.keep_versions,
                list_expired_versions=flags.list_expired_versions)


# main.create_dataset's signature: (argv, *, history) -> (manifest path, manifest)
Runner = Callable[..., tuple[str, DatasetManifest]]


def refresh(argv: Sequence[str], *, now: datetime.datetime | None = None,
            run_pipeline: Runner = create_dataset) -> dict:
    """One scheduled refresh; returns what it did ("status": unchanged,
    published, launched or listed) and the version LATEST names or will name."""
    step = plan(argv, now=now)
    digest = step.fingerprint.digest
    if step.list_expired_versions:
        return {"status": "listed", "latest": step.latest, "keep_versions": step.keep_versions,
                "expired_versions": apply_retention(step.root, step.keep_versions,
                                                    delete=False)}
    if step.unchanged:
        result = {"status": "unchanged", "version": step.latest, "fingerprint": digest}
        if step.launch_only:
            _launch_nothing(step)
        elif step.keep_versions:
            result["expired_versions"] = _keep_versions(None, root=step.root,
                                                        keep=step.keep_versions)
        return result
    take_lease(step.root, step.version)  # before the version's first object exists
    try:
        if step.launch_only:  # the job releases the lease as its last step
            launch(step.pipeline_argv, history=step.history,
                   after_publish=lambda manifest: _finish_in_job(manifest, step))
            return {"status": "launched", "version": step.version, "fingerprint": digest}
        return _run_and_promote(step, run_pipeline)
    except Exception:
        release_lease(step.root, step.version)
        raise


def _run_and_promote(step: Plan, run_pipeline: Runner) -> dict:
    try:
        path, manifest = run_pipeline(step.pipeline_argv, history=step.history)
    except Exception:
        remove_tree(step.output_dir)  # it has no manifest: nothing in it is a dataset
        raise
    promote(step.root, step.version, step.fingerprint)
    release_lease(step.root, step.version)  # written: retention may now judge it too
    result = dict(status="published", version=step.version,
                  fingerprint=step.fingerprint.digest, manifest=path,
                  total_instances=manifest.total_instances, changes=manifest.changes)
    if step.keep_versions:
        result["expired_versions"] = _keep_versions(None, root=step.root,
                                                    keep=step.keep_versions)
    return result


def _keep_versions(unused_element: object, *, root: str, keep: int) -> list[str]:
    """Retention, once LATEST has moved (also a step of a launched job)."""
    deleted = apply_retention(root, keep)
    if deleted:
        logging.getLogger(__name__).info("--keep_versions=%d deleted %s", keep,
                                         ", ".join(deleted))
    return deleted


def _finish_in_job(manifest: beam.PCollection, step: Plan) -> None:
    """A launched job's last steps: LATEST, the lease, retention."""
    released = (manifest
                | "PromoteToLatest" >> beam.Map(_promote_after_publish, root=step.root,
                                                version=step.version,
                                                built_from=step.fingerprint)
                | "ReleaseLease" >> beam.Map(_release_lease_after, root=step.root,
                                             version=step.version))
    if step.keep_versions:
        _ = released | "KeepVersions" >> beam.Map(_keep_versions, root=step.root,
                                                  keep=step.keep_versions)


def _release_lease_after(unused_element: object, *, root: str, version: str) -> None:
    release_lease(root, version)


def _promote_after_publish(manifest: DatasetManifest, *, root: str, version: str,
                           built_from: Fingerprint) -> str:
    logging.getLogger(__name__).info("%s", summary(manifest.changes))
    return promote(root, version, built_from)


def _launch_nothing(step: Plan) -> None:
    """A template launch must produce a job: one that only says why it is empty."""
    _, beam_args = parse_args(step.pipeline_argv)
    message = (f"corpus unchanged since version {step.latest} "
               f"(fingerprint {step.fingerprint.digest[:12]}); nothing to build")
    pipeline = new_pipeline(beam_args)
    reported = (pipeline
                | "CorpusUnchanged" >> beam.Create([message])
                | "Report" >> beam.Map(logging.getLogger(__name__).warning))
    if step.keep_versions:
        _ = reported | "KeepVersions" >> beam.Map(_keep_versions, root=step.root,
                                                  keep=step.keep_versions)
    pipeline.run()


def template_main(argv: Sequence[str]) -> dict:
    """The Flex Template's entry (deploy/flex_main.py): a launch-only refresh
    when --output_root is given, else a launch-only run into --output_dir."""
    if any(arg.split("=", 1)[0] == "--output_root" for arg in argv):
        return refresh([*argv, "--launch_only"])
    launch(argv)
    return {"status": "launched"}


def print_result(result: dict) -> None:
    """What a refresh did, as JSON; what changed, in a line."""
    if result["status"] == "published":
        print(f"{PROG}: {summary(result['changes'])}", file=sys.stderr)
    print(json.dumps(result, indent=2, sort_keys=True))


def main(argv: Sequence[str] | None = None, *,
         entry: Callable[[Sequence[str]], dict] = refresh) -> None:
    run_command(PROG, entry, print_result, argv,
                user_errors=USER_ERRORS, failed_runs=(PublishError, RunFailed),
                every_failure_said=True)


if __name__ == "__main__":
    main()
