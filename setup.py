"""Packaging for the pipeline and for Dataflow workers (`--setup_file=./setup.py`)."""

import setuptools

setuptools.setup(
    name="bert-pretraining-data",
    version="0.1.0",
    description=("BERT pre-training data (masked LM + next sentence prediction) "
                 "on Apache Beam: a drop-in replacement for create_pretraining_data.py"),
    python_requires=">=3.11,<3.12",
    packages=["pipeline", "transforms", "loaders"],
    install_requires=[
        "apache-beam[gcp]>=2.60,<3",
        "tensorflow>=2.16,<2.22",
        "tensorflow-transform>=1.16,<1.22",
        "google-cloud-storage>=2.14,<4",
        "numpy>=1.26,<3",
        "numba>=0.60,<1",
        "jieba>=0.42.1,<0.43",
        "blingfire>=0.1.8,<0.2",
        "syntok>=1.4.4,<2",
        "mwparserfromhell>=0.7,<0.8",
    ],
    extras_require={
        # gcp-storage-emulator: a real GCS API on loopback for the gs:// tests.
        # tokenizers: HF's WordPiece trainer, the baseline create-vocab is compared with.
        # psutil: peak RSS of a run's whole process tree (bench/pipeline.py).
        "test": ["pytest>=8,<10", "hypothesis>=6.100,<7",
                 "gcp-storage-emulator>=2026.7.19,<2027",
                 "torch==2.13.0", "matplotlib>=3.8,<4", "tokenizers>=0.20,<1",
                 "psutil>=5.9,<8"],
        # loaders.torch_data and loaders.d2l; the test extra pins the CPU build CI uses
        "torch": ["torch>=2.1,<3"],
        # inspect-pretraining-data --plot
        "plot": ["matplotlib>=3.8,<4"],
    },
    entry_points={
        "console_scripts": [
            "create-pretraining-data=pipeline.main:main",
            "create-pretraining-data-refresh=pipeline.refresh:main",
            "inspect-pretraining-data=pipeline.inspect_data:main",
            "create-vocab=pipeline.create_vocab:main",
        ],
    },
)
