# One-command setup: every target builds .venv/ from setup.py when it is missing
# or older than setup.py, so a fresh clone needs nothing but python3.11.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
OUT ?= out/sample

.PHONY: install run test bench clean

install: $(STAMP)

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The main job on the bundled sample, with the real BERT-Base uncased vocabulary.
run: install
	$(VENV)/bin/create-pretraining-data --input_file=tests/data/sample_text.txt \
		--vocab_file=tests/data/bert-base-uncased-vocab.txt --output_dir=$(OUT) --overwrite

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) bench/tokenizer.py

clean:
	rm -rf $(VENV) out *.egg-info
