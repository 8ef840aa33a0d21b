# One-command setup: every target builds .venv/ from the lock of its Python
# (pipeline/locks/venv-py3XX.txt) when it is missing or older than the lock or
# setup.py, so a fresh clone needs nothing but a Python the pipeline runs on
# (3.10 to 3.13: pipeline/cli.py, PIPELINE_PYTHONS) and make, and installs exactly
# what CI tested. LOCKED=no installs setup.py's ranges instead (make test-latest).
# .venv/ is made with PYTHON=... when given (a .venv/ of another Python version is
# made anew), else it keeps the Python it has, else it takes the newest of
# python3.13 ... python3.10 on PATH that runs.
PYTHONS := 3.13 3.12 3.11 3.10
VENV := .venv
PY := $(VENV)/bin/python
LOCKED ?= yes
STAMP := $(VENV)/.installed-$(if $(filter no,$(LOCKED)),ranges,lock)
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
LOCKS := pipeline/locks
# The lock of one set (venv: the .venv/, setup.py's [test] extra and pip; workers:
# the [pipeline] extra a Dataflow worker installs) for one Python ("3.11").
lock_of = $(LOCKS)/$(1)-py$(subst .,,$(2)).txt
LOCK := $(call lock_of,venv,$(PYTHON_VERSION))

.PHONY: install run test test-fast test-latest lock bench dist clean template dataflow schedule FORCE

install: $(STAMP)

# A locked install makes .venv/ anew, so that it holds the lock and nothing
# else, and pip check confirms the set; the project itself comes last, without
# its dependencies. numba's caches beside the modules are cleared with each
# install: a cache entry of an unchanged file can refer to modules that have
# since moved or changed.
ifeq ($(LOCKED),no)
$(STAMP): setup.py pipeline/worker_requirements.txt $(if $(filter $(VENV_VERSION),$(PYTHON_VERSION)),,FORCE)
	@$(if $(PYTHON_PROBLEM),echo '$(PYTHON_ERROR)' >&2; exit 1)
	$(PYTHON) -m venv --clear $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	find pipeline transforms loaders -name '*.nb[ic]' -delete
	touch $(STAMP)
else
$(STAMP): setup.py $(wildcard $(LOCK)) $(if $(filter $(VENV_VERSION),$(PYTHON_VERSION)),,FORCE)
	@$(if $(PYTHON_PROBLEM),echo '$(PYTHON_ERROR)' >&2; exit 1)
	$(PYTHON) -m venv --clear $(VENV)
	$(PY) -m pip install --quiet "$$(grep -o '^pip==[^ ]*' $(LOCK))"
	$(PY) -m pip install --quiet --no-deps -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m pip check
	find pipeline transforms loaders -name '*.nb[ic]' -delete
	touch $(STAMP)
endif

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

# Tomorrow's releases, before a lock is refreshed (docs/install.md#the-lock): a
# venv of setup.py's ranges alone, made anew, runs the fast suite, and the main
# job's shards from it must equal, byte for byte, those of the locked .venv/
# (test_locks.py's venv check is left out: that venv holds no lock). Not part of CI.
LATEST := .venv-latest
LATEST_RUN = --input_file=tests/data/sample_text.txt,tests/data/wikitext2_valid.txt \
	--vocab_file=tests/data/bert-base-uncased-vocab.txt --overwrite
test-latest: install
	rm -rf $(LATEST) out/latest
	$(MAKE) --no-print-directory VENV=$(LATEST) LOCKED=no PYTHON=$(PYTHON) install
	@$(LATEST)/bin/python -c 'from bert_pretraining_data.pipeline.beam_options import \
		lock_differences as d; print("newest releases beside the lock (locked, newest):", d() or "none")'
	NUMBA_CACHE_DIR=$(LATEST)/numba-cache $(LATEST)/bin/python -m pytest -q -n auto \
		--maxprocesses=4 --dist loadfile -m "not slow and not locked_venv"
	for flags in '' '--shuffle=runner --dedup=near --pack_sequences'; do \
		$(VENV)/bin/create-pretraining-data $(LATEST_RUN) $$flags --output_dir=out/latest/locked && \
		NUMBA_CACHE_DIR=$(LATEST)/numba-cache $(LATEST)/bin/create-pretraining-data \
			$(LATEST_RUN) $$flags --output_dir=out/latest/newest && \
		for shard in out/latest/locked/part-*; do cmp $$shard out/latest/newest/$${shard##*/} || exit 1; done && \
		echo "shards byte-identical: $${flags:-default flags}" || exit 1; done

# The locks, one per supported Python, from setup.py's ranges with pip-tools'
# resolver, which is pip's own (pip's configuration, indexes and constraints
# hold): the .venv/'s set (venv-py3XX.txt) and, within it, the workers' set
# (workers-py3XX.txt). Keeps each pin that still satisfies setup.py; UPGRADE=1
# takes the newest release of everything. Each Python must run as python3.1x
# (with pyenv: PYENV_VERSION=3.13.0:3.12.1:3.11.7:3.10.13 make lock).
LOCK_TOOLS := pip==26.3 pip-tools==7.7.0
LOCK_PYTHONS ?= $(PYTHONS)
COMPILE = CUSTOM_COMPILE_COMMAND='make lock' build/lock-tools/$(1)/bin/pip-compile --quiet \
	--allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links \
	--no-emit-trusted-host --annotation-style=line $(if $(UPGRADE),--upgrade)
lock: $(foreach v,$(LOCK_PYTHONS),lock-$(v))

lock-%:
	@python$* -c '' 2>/dev/null || { echo "make: python$* does not run; each supported \
	Python locks its own set: put it on PATH (pyenv: PYENV_VERSION=...)" >&2; exit 1; }
	python$* -m venv --clear build/lock-tools/$*
	build/lock-tools/$*/bin/pip install --quiet $(LOCK_TOOLS)
	$(call COMPILE,$*) --extra test -o $(call lock_of,venv,$*) setup.py
	$(call COMPILE,$*) --extra pipeline -c $(call lock_of,venv,$*) \
		-o $(call lock_of,workers,$*) setup.py

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
