"""deploy/ checked statically and by dry runs: the Flex Template metadata against
the CLI, the Dockerfile against setup.py, the Makefile's printed commands against
both (and against gcloud's own argument parser when gcloud is installed), and the
template's main file run on the DirectRunner."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from conftest import DATA, UNCASED_VOCAB
from helpers.dockerfile import build_args, dockerfile_steps
from bert_pretraining_data.pipeline import options, refresh
from bert_pretraining_data.pipeline.options import parse_args

ROOT = pathlib.Path(__file__).resolve().parent.parent
DISTRIBUTION = "bert-pretraining-data"
PACKAGES = ("pipeline", "transforms", "loaders")  # bert_pretraining_data.<name>
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
METADATA = json.loads((DEPLOY / "metadata.json").read_text())
PARAMS = {p["name"]: p for p in METADATA["parameters"]}
# CLI flags the template does not offer, and why.
NOT_IN_TEMPLATE = {
    "output_file": "exact file names as the original; template runs write a directory",
    "reference_compatible": "runs in one process, not on Dataflow",
    "input_split_bytes": "hidden; for tests only",
    "nodo_lower_case": "absl spelling of do_lower_case=false",
    "nodo_whole_word_mask": "absl spelling of do_whole_word_mask=false",
    "launch_only": "the template's main file always sets it",
    "gzip_compress": "the Model Garden's spelling of compression=gzip",
    "nofavor_shorter_ngram": "absl spelling of favor_shorter_ngram=false",
    "nouse_v2_feature_names": "absl spelling of use_v2_feature_names=false",
    "nogzip_compress": "absl spelling of gzip_compress=false",
    "progress": "a Dataflow job's progress is its console page",
    "tokenization": "the Model Garden's spelling of spm_model_file (with sp_model_file)",
    "sp_model_file": "the Model Garden's spelling of spm_model_file",
    "list_expired_versions": "a question asked from a workstation; a launch must build a job",
}
# Choices of a CLI flag the template does not offer, and why.
TEMPLATE_REFUSES = {"recipe": {"d2l": "its own tf.Transform pipeline (pipeline/dataflow.py)"}}
# Pipeline options a launch passes besides the template's own parameters.
PIPELINE_OPTIONS = {"sdk_container_image"}
PATH_PARAMS = {"input_file", "vocab_file", "spm_model_file", "tokenizer_file", "output_dir",
               "output_root", "decontaminate", "mixture", "quality_config"}
# Shares of the documents held out: in [0, 0.5).
FRACTION_PARAMS = {"validation_fraction", "test_fraction"}
# Flags of the refresh (pipeline/refresh.py), not of the pipeline it runs.
REFRESH_PARAMS = {"output_root", "keep_versions"}
# a flag given in another's place
INSTEAD_OF = {"tokenizer_file": "vocab_file", "mixture": "input_file",
              "mixture_layout": "input_file", "tokenizer_engine": "vocab_file"}
BASE_FLAGS = ["--input_file=gs://b/in/*.txt", "--vocab_file=gs://b/vocab.txt",
              "--output_dir=gs://b/out"]


def _cli_actions() -> dict[str, object]:
    actions = {}
    for parser in (options.parser(), refresh.parser()):
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    actions[flag[2:]] = action
    return actions


def _matches(param: dict, value: str) -> bool:
    return all(re.search(regex, value) for regex in param["regexes"])


# --- metadata.json -------------------------------------------------------------


def test_every_template_parameter_is_a_cli_flag_and_vice_versa():
    cli = set(_cli_actions())
    assert set(PARAMS) <= cli, f"not CLI flags: {set(PARAMS) - cli}"
    assert cli - set(PARAMS) == set(NOT_IN_TEMPLATE), "offer new flags in metadata.json"
    assert len(PARAMS) == len(METADATA["parameters"])  # no duplicate names


def test_metadata_parameters_are_documented():
    assert METADATA["name"] and METADATA["description"]
    for param in METADATA["parameters"]:
        assert param["label"] and len(param["helpText"]) > 20, param["name"]
        assert param["regexes"], param["name"]
        for regex in param["regexes"]:
            re.compile(regex)
    required = {p["name"] for p in METADATA["parameters"] if not p["isOptional"]}
    # the input (input_file or mixture) and the tokenizer (vocab_file,
    # spm_model_file or tokenizer_file) are checked by the job's own
    # validation, in one line
    assert required == set()


def _samples(name: str, action) -> tuple[list[str], list[str]]:
    """(values the CLI accepts, values it does not) for one flag."""
    if name in PATH_PARAMS:
        example = PARAMS[name]["helpText"].rsplit("Example: ", 1)[1]
        return [example], ["/tmp/local/dir", "corpus/*.txt", ""]
    if action.choices:
        refused = list(TEMPLATE_REFUSES.get(name, {}))
        return [c for c in action.choices if c not in refused], [*refused, "other", ""]
    if name in LIST_SAMPLES:
        return LIST_SAMPLES[name]
    if name in FRACTION_PARAMS:
        return ["0", "0.01", ".2", "0.45"], ["0.5", "1", "-0.1", "ten", ""]
    if action.type is int:
        return ["5", "512"], ["ten", "1.5", "-3", ""]
    if action.type is float:
        return ["0.15", "1", "0.5"], ["ten", "1.5", "-0.1", ""]
    return ["true", "false"], ["yes please", ""]  # the CLI's booleans


# Flags whose values need another flag (the CLI refuses them alone).
NEEDS = {"max_ngram_size": ["--do_whole_word_mask"],
         "whole_word_segmenter": ["--do_whole_word_mask"],
         "dedup_threshold": ["--dedup=near"], "dedup_ngram": ["--dedup=near"],
         "decontaminate_field": ["--decontaminate=gs://b/benchmarks.jsonl"],
         "decontaminate_ngram": ["--decontaminate=gs://b/benchmarks.jsonl"],
         "max_sequences_per_pack": ["--pack_sequences"],
         "held_out_masking": ["--validation_fraction=0.1"],
         "mixture_layout": ["--mixture=gs://b/mixture.json"],
         "parquet_compression": ["--output_format=parquet"],
         "mds_layout": ["--output_format=mds"], "mds_compression": ["--output_format=mds"],
         "tokenizer_engine": ["--tokenizer_file=gs://b/tokenizer.json"],
         "quality_config": ["--quality_filters=c4"],
         "language_threshold": ["--languages=en"]}
# Values of a comma-list flag the CLI takes, and values it refuses.
LIST_SAMPLES = {"quality_filters": (["c4", "gopher,fineweb", "c4,gopher,fineweb"],
                                    ["c4,spam", "c4, gopher", ""]),
                "languages": (["en", "en,de,zh", "ceb"], ["EN", "en, de", "english", ""]),
                # a probability, from 0 to below 1 (transforms.quality.language)
                "language_threshold": (["0.65", "0", ".5", "0.99"], ["1", "1.5", "-0.1", "ten",
                                                                   ""])}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_parameter_regexes_agree_with_the_cli(name):
    good, bad = _samples(name, _cli_actions()[name])
    for value in good:
        assert _matches(PARAMS[name], value), value
        if name in REFRESH_PARAMS:
            # the refresh takes it
            refresh.parser(with_run_flags=False).parse_args([f"--{name}={value}"])
        else:
            replaced = (name, INSTEAD_OF.get(name))
            base = [f for f in BASE_FLAGS if f.split("=")[0][2:] not in replaced]
            parse_args([*base, *NEEDS.get(name, []), f"--{name}={value}"])  # the pipeline takes it
    for value in bad:
        assert not _matches(PARAMS[name], value), value


def test_the_template_takes_several_benchmark_fields_as_the_cli_does():
    """--decontaminate_field=sentence,context reaches a Flex Template launch too."""
    assert _matches(PARAMS["decontaminate_field"], "sentence,context")
    assert not _matches(PARAMS["decontaminate_field"], "sentence, context")
    config, _ = parse_args([*BASE_FLAGS, *NEEDS["decontaminate_field"],
                            "--decontaminate_field=sentence,context"])
    assert config.decontaminate_field == "sentence,context"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcloud") is None, reason="needs the gcloud CLI")
def test_gcloud_accepts_the_metadata(tmp_path):
    done = subprocess.run(
        ["gcloud", "dataflow", "flex-template", "build", "gs://b/t.json", "--image=i",
         "--sdk-language=PYTHON", f"--metadata-file={DEPLOY / 'metadata.json'}",
         "--print-only"], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, CLOUDSDK_CONFIG=str(tmp_path), CLOUDSDK_CORE_DISABLE_PROMPTS="1"))
    assert done.returncode == 0, done.stderr
    assert '"name": "output_root"' in done.stdout


# --- Dockerfile ----------------------------------------------------------------


def _package_folders() -> set[str]:
    """The repository folders the installed package's subpackages come from."""
    return {pathlib.Path(importlib.import_module(f"bert_pretraining_data.{name}").__file__)
            .parent.relative_to(ROOT).as_posix() for name in PACKAGES}


def test_dockerfile_python_matches_setup_py():
    """The image's Python is one the pipeline runs on, for launcher and
    workers alike; its Beam and packages are the lock's (test_locks.py)."""
    steps = dockerfile_steps(DOCKERFILE)
    args = build_args(steps)
    (beam,) = [r for r in map(Requirement, importlib.metadata.requires(DISTRIBUTION))
               if r.name == "apache-beam" and r.marker.evaluate({"extra": "pipeline"})]
    assert not beam.marker.evaluate({"extra": ""})  # not in the base install
    assert args["BEAM_VERSION"] in beam.specifier
    # The image's Python is one the pipeline runs on (its extra is marked with that range).
    assert beam.marker.evaluate({"extra": "pipeline", "python_version": args["PYTHON_VERSION"]})
    python_requires = importlib.metadata.metadata(DISTRIBUTION)["Requires-Python"]
    assert args["PYTHON_VERSION"] + ".0" in SpecifierSet(python_requires)
    # The launcher and the workers agree: both run this image's Python (the
    # launcher stage only contributes its binary, from the same Python's base).
    froms = [a for i, a in steps if i == "FROM"]
    assert froms[-1] == "apache/beam_python${PYTHON_VERSION}_sdk:${BEAM_VERSION}"
    launcher = "python" + args["PYTHON_VERSION"].replace(".", "") + "-template-launcher-base"
    assert froms[0].startswith(f"gcr.io/dataflow-templates-base/{launcher} AS launcher")


def test_dockerfile_copies_the_packages_and_the_template_main_file():
    steps = dockerfile_steps(DOCKERFILE)
    copies = [a.split() for i, a in steps if i == "COPY" and not a.startswith("--from")]
    for source, _ in copies:
        assert (ROOT / source).exists(), source
    copied = {source.rstrip("/") for source, _ in copies}
    assert _package_folders() == set(PACKAGES) <= copied
    (workdir,) = [a for i, a in steps if i == "WORKDIR"]
    env = dict(a.split("=", 1) for i, a in steps if i == "ENV")
    main_file = pathlib.PurePosixPath(env["FLEX_TEMPLATE_PYTHON_PY_FILE"])
    relative = main_file.relative_to(workdir)
    assert [str(relative), str(relative)] in copies
    assert ("ENTRYPOINT", '["/opt/apache/beam/boot"]') in steps
    assert any(i == "COPY" and a.startswith("--from=launcher /opt/google/dataflow/"
                                           "python_template_launcher") for i, a in steps)


# --- Makefile ------------------------------------------------------------------

TEMPLATE_VARS = {"PROJECT": "my-project", "BUCKET": "my-bucket", "TAG": "v7"}
IMAGE = "us-central1-docker.pkg.dev/my-project/bert-pretraining-data/bert-pretraining-data:v7"
TEMPLATE = "gs://my-bucket/templates/bert-pretraining-data-v7.json"
RUN_VARS = dict(TEMPLATE_VARS, INPUT="gs://my-bucket/wiki/*.txt,gs://my-bucket/books/*.txt",
                VOCAB="gs://my-bucket/vocab.txt")


@pytest.fixture
def no_tools(tmp_path) -> pathlib.Path:
    """docker and gcloud stand-ins that leave a mark if anything runs them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("docker", "gcloud"):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran-{tool}\nexit 1\n")
        script.chmod(0o755)
    return bin_dir


def _make(target: str, bin_dir: pathlib.Path, **variables: str
          ) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["make", "-s", "-C", str(ROOT), target, "DRY_RUN=1",
                           *(f"{k}={v}" for k, v in variables.items())],
                          capture_output=True, text=True, env=env, timeout=120)


def _printed(done: subprocess.CompletedProcess, bin_dir: pathlib.Path) -> list[list[str]]:
    assert done.returncode == 0, done.stderr
    assert not list(bin_dir.parent.glob("ran-*")), "DRY_RUN=1 ran a command"
    return [shlex.split(line[2:]) for line in done.stdout.splitlines() if line.startswith("+ ")]


def _flags(command: list[str]) -> dict[str, str]:
    return dict(arg[2:].split("=", 1) for arg in command if arg.startswith("--") and "=" in arg)


def _parameters(value: str) -> dict[str, str]:
    assert value.startswith("^~^")  # gcloud's alternate delimiter: values hold commas
    return dict(item.split("=", 1) for item in value[3:].split("~"))


def _check_launch_parameters(parameters: dict[str, str]) -> None:
    assert set(parameters) <= set(PARAMS) | PIPELINE_OPTIONS
    assert {n for n, p in PARAMS.items() if not p["isOptional"]} <= set(parameters)
    for name, value in parameters.items():
        if name in PARAMS:
            assert _matches(PARAMS[name], value), (name, value)
    assert parameters["sdk_container_image"] == IMAGE  # workers run the template image


def test_make_template_prints_build_push_and_register(no_tools):
    build, push, register = _printed(_make("template", no_tools, **TEMPLATE_VARS), no_tools)
    assert build == ["docker", "build", "-f", "deploy/Dockerfile", "-t", IMAGE, "."]
    assert push == ["docker", "push", IMAGE]
    assert register[:5] == ["gcloud", "dataflow", "flex-template", "build", TEMPLATE]
    assert _flags(register) == {"project": "my-project", "image": IMAGE,
                                "sdk-language": "PYTHON",
                                "metadata-file": "deploy/metadata.json"}


@pytest.mark.parametrize("output", [{"OUTPUT": "gs://my-bucket/out/run-1"},
                                    {"OUTPUT_ROOT": "gs://my-bucket/bert-data"}])
def test_make_dataflow_prints_a_launch_of_that_template(no_tools, output):
    variables = dict(RUN_VARS, PARAMS="dupe_factor=5 max_seq_length=512", **output)
    (command,) = _printed(_make("dataflow", no_tools, **variables), no_tools)
    assert command[:4] == ["gcloud", "dataflow", "flex-template", "run"]
    assert re.fullmatch(r"bert-pretraining-data-\d{8}-\d{6}", command[4])
    flags = _flags(command)
    assert flags["template-file-gcs-location"] == TEMPLATE
    parameters = _parameters(flags["parameters"])
    _check_launch_parameters(parameters)
    assert parameters["input_file"] == RUN_VARS["INPUT"]
    assert parameters["dupe_factor"] == "5" and parameters["max_seq_length"] == "512"
    assert ("output_root" in parameters) == ("OUTPUT_ROOT" in output)


def test_a_mixture_launches_and_schedules_without_input(no_tools, tmp_path):
    variables = {k: v for k, v in RUN_VARS.items() if k != "INPUT"}
    variables["PARAMS"] = "mixture=gs://my-bucket/mixture.json"
    (command,) = _printed(_make("dataflow", no_tools, OUTPUT="gs://my-bucket/out", **variables),
                          no_tools)
    parameters = _parameters(_flags(command)["parameters"])
    _check_launch_parameters(parameters)
    assert "input_file" not in parameters
    assert parameters["mixture"] == "gs://my-bucket/mixture.json"
    body_path = tmp_path / "body.json"
    _printed(_make("schedule", no_tools, OUTPUT_ROOT="gs://my-bucket/bert-data",
                   BODY=str(body_path), SERVICE_ACCOUNT="refresh@my-project.iam.gserviceaccount.com",
                   **variables), no_tools)
    scheduled = json.loads(body_path.read_text())["launchParameter"]["parameters"]
    _check_launch_parameters(scheduled)
    assert "input_file" not in scheduled and scheduled["mixture"] == variables["PARAMS"][8:]
    done = _make("dataflow", no_tools, **{k: v for k, v in variables.items() if k != "PARAMS"},
                 OUTPUT="gs://my-bucket/out")
    assert done.returncode != 0 and "INPUT is not set" in done.stderr


def test_make_schedule_writes_a_launch_body_and_prints_the_scheduler_job(no_tools, tmp_path):
    body_path = tmp_path / "body.json"
    variables = dict(RUN_VARS, OUTPUT_ROOT="gs://my-bucket/bert-data", BODY=str(body_path),
                     SERVICE_ACCOUNT="refresh@my-project.iam.gserviceaccount.com")
    variables["PARAMS"] = "validation_fraction=0.01 decontaminate=gs://my-bucket/bench/*.jsonl"
    (command,) = _printed(_make("schedule", no_tools, **variables), no_tools)
    body = json.loads(body_path.read_text())["launchParameter"]
    assert body["containerSpecGcsPath"] == TEMPLATE
    _check_launch_parameters(body["parameters"])
    assert body["parameters"]["output_root"] == "gs://my-bucket/bert-data"
    assert body["parameters"]["keep_versions"] == "4"  # a month of weekly versions
    # PARAMS reach every scheduled refresh, as they reach `make dataflow`'s job
    assert body["parameters"]["validation_fraction"] == "0.01"
    assert body["parameters"]["decontaminate"] == "gs://my-bucket/bench/*.jsonl"
    assert set(body["environment"]) <= {  # FlexTemplateRuntimeEnvironment fields
        "tempLocation", "serviceAccountEmail", "machineType", "maxWorkers", "numWorkers",
        "diskSizeGb", "stagingLocation", "network", "subnetwork", "workerRegion"}
    assert command[:5] == ["gcloud", "scheduler", "jobs", "create", "http"]
    flags = _flags(command)
    assert flags["uri"] == ("https://dataflow.googleapis.com/v1b3/projects/my-project/"
                            "locations/us-central1/flexTemplates:launch")
    assert flags["message-body-from-file"] == str(body_path)
    assert flags["oauth-service-account-email"] == variables["SERVICE_ACCOUNT"]


def test_make_targets_name_a_missing_variable(no_tools):
    done = _make("dataflow", no_tools, PROJECT="my-project", BUCKET="my-bucket")
    assert done.returncode != 0 and "INPUT is not set" in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcloud") is None, reason="needs the gcloud CLI")
def test_gcloud_parses_every_printed_command(no_tools, tmp_path):
    """Without an account gcloud stops right after parsing: a wrong flag would
    fail earlier, with 'unrecognized arguments'."""
    printed = _printed(_make("template", no_tools, **TEMPLATE_VARS), no_tools)[2:]
    printed += _printed(_make("dataflow", no_tools, OUTPUT="gs://my-bucket/out",
                              **RUN_VARS), no_tools)
    printed += _printed(_make("schedule", no_tools, OUTPUT_ROOT="gs://my-bucket/data",
                              BODY=str(tmp_path / "body.json"), SERVICE_ACCOUNT="a@b.com",
                              **RUN_VARS), no_tools)
    env = dict(os.environ, CLOUDSDK_CONFIG=str(tmp_path / "gcloud"),
               CLOUDSDK_CORE_DISABLE_PROMPTS="1")
    gcloud = shutil.which("gcloud")
    for command in printed:
        done = subprocess.run([gcloud, *command[1:]], capture_output=True, text=True,
                              env=env, cwd=ROOT, timeout=120)
        assert "do not currently have an active account" in done.stderr, done.stderr


# --- the template's main file --------------------------------------------------


@pytest.mark.slow
def test_flex_main_runs_a_refresh_and_a_one_off_run(tmp_path):
    flags = [f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
             "--dupe_factor=1", "--num_shards=1"]
    done = subprocess.run(
        [sys.executable, str(DEPLOY / "flex_main.py"), *flags,
         f"--output_root={tmp_path / 'root'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "launched"
    assert (tmp_path / "root" / "LATEST").read_text().strip() == result["version"]

    result = refresh.template_main([*flags, f"--output_dir={tmp_path / 'once'}"])
    assert result["status"] == "launched"
    assert (tmp_path / "once" / "manifest.json").exists()

    bad = subprocess.run([sys.executable, str(DEPLOY / "flex_main.py"), *flags],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert bad.returncode == 2 and "output" in bad.stderr
