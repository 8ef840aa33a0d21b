# One-command setup: every target builds .venv/ from setup.py when it is missing
# or older than setup.py, so a fresh clone needs nothing but a Python the pipeline
# runs on (3.10 to 3.13: pipeline/cli.py, PIPELINE_PYTHONS) and make.
# .venv/ is made with PYTHON=... when given (a .venv/ of another Python version is
# made anew), else it keeps the Python it has, else it takes the newest of
# python3.13 ... python3.10 on PATH that runs.
PYTHONS := 3.13 3.12 3.11 3.10
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
version_of = $(shell $(1) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
VENV_VERSION := $(call version_of,$(PY))
ifeq ($(origin PYTHON),undefined)
PYTHON := $(if $(VENV_VERSION),$(PY),$(shell for v in $(PYTHONS); do \
	python$$v -c '' >/dev/null 2>&1 && { echo python$$v; break; }; done))
endif
PYTHON_VERSION := $(call version_of,$(PYTHON))
ifeq ($(PYTHON),)
PYTHON_PROBLEM := no python3.1x on PATH runs
else ifeq ($(PYTHON_VERSION),)
PYTHON_PROBLEM := $(PYTHON) does not run
else ifeq ($(filter $(PYTHON_VERSION),$(PYTHONS)),)
PYTHON_PROBLEM := $(PYTHON) is Python $(PYTHON_VERSION)
endif
PYTHON_ERROR = make: $(PYTHON_PROBLEM); the pipeline runs on Python $(lastword $(PYTHONS)) to \
	$(firstword $(PYTHONS)): install one, or name it with PYTHON=/path/to/python3.1x
OUT ?= out/sample

.PHONY: install run test test-fast bench dist clean template dataflow schedule FORCE

install: $(STAMP)

# numba's caches beside the modules are cleared with each install: a cache entry
# of an unchanged file can refer to modules that have since moved or changed.
$(STAMP): setup.py pipeline/worker_requirements.txt $(if $(filter $(VENV_VERSION),$(PYTHON_VERSION)),,FORCE)
	@$(if $(PYTHON_PROBLEM),echo '$(PYTHON_ERROR)' >&2; exit 1)
	$(if $(filter $(VENV_VERSION),$(PYTHON_VERSION)),,$(PYTHON) -m venv --clear $(VENV))
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	find pipeline transforms loaders -name '*.nb[ic]' -delete
	touch $(STAMP)

# The main job on the bundled sample, with the real BERT-Base uncased vocabulary.
run: install
	$(VENV)/bin/create-pretraining-data --input_file=tests/data/sample_text.txt \
		--vocab_file=tests/data/bert-base-uncased-vocab.txt --output_dir=$(OUT) --overwrite

# Test files spread over the cores (at most 4), each file whole on one worker.
PYTEST := $(PY) -m pytest -q -n auto --maxprocesses=4 --dist loadfile
test: install
	$(PYTEST)

# The loop between edits: every test not marked slow (end-to-end runs, venvs, services).
test-fast: install
	$(PYTEST) -m "not slow"

# Small sizes; bench/README.md has the full runs (200 MB, the original beside).
bench: install
	$(PY) bench/tokenizer.py
	$(PY) bench/pipeline.py --sizes 1,5 --workers 1,2 --stages

# The wheel to install where the pipeline's output is used (docs/install.md).
dist: install
	rm -rf dist build  # setuptools would reuse stale files from build/
	$(PY) -m pip wheel --quiet --no-deps -w dist .

clean:
	rm -rf $(VENV) out dist build *.egg-info

# --- Dataflow (deploy/): build the Flex Template, launch a job, schedule refreshes.
# Each docker/gcloud command is printed before it runs; DRY_RUN=1 only prints.
#   make template PROJECT=p BUCKET=b TAG=v1
#   make dataflow PROJECT=p BUCKET=b TAG=v1 INPUT='gs://b/wiki/*.txt' VOCAB=gs://b/vocab.txt OUTPUT=gs://b/bert-data/run-1
#     (a mixture: PARAMS='mixture=gs://b/mixture.json' in place of INPUT)
#   make schedule PROJECT=p BUCKET=b TAG=v1 INPUT=... VOCAB=... OUTPUT_ROOT=gs://b/bert-data SERVICE_ACCOUNT=sa@p.iam.gserviceaccount.com [KEEP_VERSIONS=4] [PARAMS='validation_fraction=0.01 ...']
RUN := deploy/run.sh
REGION ?= us-central1
REPOSITORY ?= bert-pretraining-data
TAG ?= dev
IMAGE ?= $(REGION)-docker.pkg.dev/$(PROJECT)/$(REPOSITORY)/bert-pretraining-data:$(TAG)
TEMPLATE ?= gs://$(BUCKET)/templates/bert-pretraining-data-$(TAG).json
JOB ?= bert-pretraining-data
MACHINE_TYPE ?= n2-standard-4
MAX_WORKERS ?= 16
DISK_GB ?= 50
PARAMS ?=
SCHEDULE ?= 0 3 * * 1
KEEP_VERSIONS ?= 4
BODY ?= out/refresh_launch.json
OUTPUT_PARAM = $(if $(OUTPUT_ROOT),output_root=$(OUTPUT_ROOT),output_dir=$(OUTPUT))
empty :=
space := $(empty) $(empty)
EXTRA_PARAMS = $(subst $(space),,$(foreach p,$(PARAMS),~$(p)))
require = $(if $($(1)),,$(error $(1) is not set; run: make $@ $(1)=VALUE))
# The corpus: INPUT, or a mixture file among PARAMS.
require_input = $(if $(INPUT)$(findstring mixture=,$(PARAMS)),,$(error INPUT is not set; run: make $@ INPUT=gs://... (or PARAMS='mixture=gs://...')))
INPUT_PARAM = $(if $(INPUT),input_file=$(INPUT)~)

template:
	$(call require,PROJECT)$(call require,BUCKET)
	$(RUN) docker build -f deploy/Dockerfile -t $(IMAGE) .
	$(RUN) docker push $(IMAGE)
	$(RUN) gcloud dataflow flex-template build $(TEMPLATE) --project=$(PROJECT) \
		--image=$(IMAGE) --sdk-language=PYTHON --metadata-file=deploy/metadata.json

dataflow:
	$(call require,PROJECT)$(call require,BUCKET)$(require_input)$(call require,VOCAB)
	$(if $(OUTPUT)$(OUTPUT_ROOT),,$(error set OUTPUT=gs://... (one run) or OUTPUT_ROOT=gs://... (a refresh)))
	$(RUN) gcloud dataflow flex-template run $(JOB)-$(shell date -u +%Y%m%d-%H%M%S) \
		--project=$(PROJECT) --region=$(REGION) --template-file-gcs-location=$(TEMPLATE) \
		--temp-location=gs://$(BUCKET)/tmp --worker-machine-type=$(MACHINE_TYPE) \
		--max-workers=$(MAX_WORKERS) --additional-pipeline-options=disk_size_gb=$(DISK_GB) \
		'--parameters=^~^$(INPUT_PARAM)vocab_file=$(VOCAB)~$(OUTPUT_PARAM)~sdk_container_image=$(IMAGE)$(EXTRA_PARAMS)'

schedule:
	$(call require,PROJECT)$(call require,BUCKET)$(require_input)$(call require,VOCAB)$(call require,OUTPUT_ROOT)$(call require,SERVICE_ACCOUNT)
	@mkdir -p $(dir $(BODY))
	JOB='$(JOB)' TEMPLATE='$(TEMPLATE)' INPUT='$(INPUT)' VOCAB='$(VOCAB)' OUTPUT_ROOT='$(OUTPUT_ROOT)' \
	IMAGE='$(IMAGE)' BUCKET='$(BUCKET)' SERVICE_ACCOUNT='$(SERVICE_ACCOUNT)' \
	MACHINE_TYPE='$(MACHINE_TYPE)' MAX_WORKERS='$(MAX_WORKERS)' DISK_GB='$(DISK_GB)' \
	KEEP_VERSIONS='$(KEEP_VERSIONS)' \
		$(PYTHON) -c 'import json, os, string, sys; body = json.loads(string.Template(open(sys.argv[1]).read()).substitute(os.environ)); parameters = body["launchParameter"]["parameters"]; parameters.update(p.split("=", 1) for p in sys.argv[2:]); [parameters.pop(k) for k, v in list(parameters.items()) if not v]; json.dump(body, sys.stdout, indent=2)' \
		deploy/refresh_launch.json $(PARAMS) > $(BODY)
	$(RUN) gcloud scheduler jobs create http $(JOB)-refresh --project=$(PROJECT) \
		--location=$(REGION) '--schedule=$(SCHEDULE)' --time-zone=Etc/UTC \
		--uri=https://dataflow.googleapis.com/v1b3/projects/$(PROJECT)/locations/$(REGION)/flexTemplates:launch \
		--http-method=POST --headers=Content-Type=application/json \
		--oauth-service-account-email=$(SERVICE_ACCOUNT) --message-body-from-file=$(BODY)
