"""Packaging: one import namespace, a light base install, the pipeline behind an extra.

The repository keeps the design card's top-level folders (`pipeline/`,
`transforms/`, `loaders/`); installed, they are `bert_pretraining_data.pipeline`,
`.transforms` and `.loaders`, so that a training repository with its own
`pipeline/` or `loaders/` folder neither shadows them nor is shadowed
(`bert_pretraining_data` itself is an implicit namespace package).

The base install is what a training environment needs to read the output:
the loaders, the collators and dynamic masking (numpy, numba, google-crc32c,
sentencepiece).
`[pipeline]` adds what building the data needs (Apache Beam, TensorFlow, the
corpus libraries); `[torch]` adds PyTorch for the PyTorch and d2l loaders.
Dataflow workers that install this package through `--setup_file` get no
extras; the job passes them the workers' lock of its Python
(`pipeline/locks/workers-py3XX.txt`, pipeline/beam_options.py). The extras keep
ranges, from `pipeline/worker_requirements.txt`, the one list of the
pipeline's dependencies besides Beam; the locks (make lock) pin what the
.venv/, CI, the workers and the Flex Template image install.

The base install and the `[torch]`, `[tf]`, `[gcs]` extras run on every CPython
their dependencies publish wheels for, 3.10 and up; the pipeline only where
tfx-bsl does (pipeline/cli.py: PIPELINE_PYTHONS). Its requirements carry that
range as an environment marker: on a newer Python `[pipeline]` installs nothing
(rather than failing deep in pip's resolver) and the tools that build data say,
in one line, which Pythons they need.
"""

import pathlib
import runpy

import setuptools

NAMESPACE = "bert_pretraining_data"
FOLDERS = ("pipeline", "transforms", "loaders")

# Everything the loaders, collators and dynamic masking import (sentencepiece:
# the pieces, ids and word starts of a SentencePiece dataset's model).
BASE = [
    "numpy>=1.26,<3",
    "numba>=0.60,<1",
    "google-crc32c>=1.5,<2",
    "sentencepiece>=0.2,<0.3",
]
WORKER_REQUIREMENTS = pathlib.Path(__file__).parent / "pipeline" / "worker_requirements.txt"
WORKER = [  # as pipeline.beam_options.requirement_lines
    line.split("#")[0].strip() for line in WORKER_REQUIREMENTS.read_text().splitlines()
    if line.split("#")[0].strip()]
_, NEWEST_PIPELINE_PYTHON = runpy.run_path(
    str(WORKER_REQUIREMENTS.with_name("cli.py")))["PIPELINE_PYTHONS"]
PIPELINE_MARKER = 'python_version <= "{}.{}"'.format(*NEWEST_PIPELINE_PYTHON)
PIPELINE = [f"{requirement}; {PIPELINE_MARKER}"
            for requirement in ["apache-beam[gcp]>=2.60,<3", *WORKER]]
PLOT = ["matplotlib>=3.8,<4"]


def packages() -> list[str]:
    """The three folders and their subpackages (transforms.packing, ...) as
    modules of the namespace."""
    root = pathlib.Path(__file__).parent
    return [".".join((NAMESPACE, *init.parent.relative_to(root).parts))
            for folder in FOLDERS for init in sorted((root / folder).rglob("__init__.py"))]

setuptools.setup(
    name="bert-pretraining-data",
    version="0.1.0",
    description=("BERT pre-training data (masked LM + next sentence prediction) "
                 "on Apache Beam: a drop-in replacement for create_pretraining_data.py"),
    python_requires=">=3.10",
    packages=packages(),
    package_dir={f"{NAMESPACE}.{folder}": folder for folder in FOLDERS},
    # the ranges the extras are built from, and the workers' locks a Dataflow job sends;
    # spaCy's English tokenizer rules the quality filters split words by
    package_data={f"{NAMESPACE}.pipeline": [WORKER_REQUIREMENTS.name, "locks/workers-*.txt"],
                  f"{NAMESPACE}.transforms.quality": ["english_words.json"]},
    install_requires=BASE,
    extras_require={
        "pipeline": PIPELINE,
        # loaders.torch_data and loaders.d2l
        "torch": ["torch>=2.1,<3"],
        # loaders.tf_data
        "tf": [r for r in WORKER if r.startswith("tensorflow>")],
        # the loaders of an --output_format=parquet dataset (within Beam's pyarrow range)
        "parquet": ["pyarrow>=16,<26"],
        # the loaders of a --tokenizer_file dataset: its tokenizer.json's pad and mask
        "tokenizers": [r for r in WORKER if r.startswith("tokenizers>")],
        # gs:// datasets in the loaders, through fsspec
        "gcs": ["gcsfs>=2024.2,<2028"],
        # inspect-pretraining-data --plot
        "plot": PLOT,
        # gcp-storage-emulator: a real GCS API on loopback for the gs:// tests.
        # psutil: peak RSS of a run's whole process tree (bench/pipeline.py).
        # datasketch: the MinHash the dedup stage's signatures are checked against.
        # pytest-xdist: make test runs the suite on every core (two on CI's machine).
        # torch: the CPU build CI uses, pinned.
        # datasets: the Hugging Face client that reads --output_format=parquet shards.
        # duckdb: a dataset's statistics in one SQL query over its Parquet shards.
        # pip: the .venv/'s installer, locked with what it installs (make lock).
        # transformers: tiny HF models (BERT on packed rows; RoBERTa and ModernBERT on
        # tokenizer.json datasets) train on the loaders' batches.
        "test": PIPELINE + PLOT + [
            "pytest>=8,<10", "pytest-xdist>=3.5,<4", "hypothesis>=6.100,<7",
            "gcp-storage-emulator>=2026.7.19,<2027",
            "torch==2.13.0", "psutil>=5.9,<8", "gcsfs>=2024.2,<2028",
            "transformers>=5,<6", "datasketch>=2,<3", "datasets>=3,<6", "duckdb>=1.1,<3",
            "pip>=25"],
    },
    entry_points={
        "console_scripts": [
            f"create-pretraining-data={NAMESPACE}.pipeline.cli:create_pretraining_data",
            f"create-pretraining-data-refresh={NAMESPACE}.pipeline.cli:"
            "create_pretraining_data_refresh",
            f"create-vocab={NAMESPACE}.pipeline.cli:create_vocab",
            f"inspect-pretraining-data={NAMESPACE}.pipeline.inspect_data:main",
        ],
    },
)
