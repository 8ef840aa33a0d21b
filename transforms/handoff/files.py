"""Local and gs:// files read without Beam: the tokenizers' vocabularies and
models outside the pipeline, and the loaders' datasets.

Here rather than in loaders/, so that the core reads a file without importing
the loaders (the loaders import the core, never the other way). Training jobs
should not need the pipeline's runtime: local paths use plain `open`. URLs
(gs://, s3://, ...) go through fsspec, the filesystem layer of PyTorch's
ecosystem (torch depends on it; gs:// needs gcsfs, the `[gcs]` extra), so a
PyTorch job reads a bucket without TensorFlow; where fsspec has no
implementation of the scheme installed, TensorFlow's `tf.io.gfile` serves it
if TensorFlow is there (a TF job needs nothing more). Either is imported only
when a URL is given. `.gz` files are decompressed on the fly.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import posixpath
from typing import BinaryIO, Iterator

join = posixpath.join
dirname = posixpath.dirname
basename = posixpath.basename


def is_url(path: str) -> bool:
    return "://" in path


class _GFileSystem:
    """TensorFlow's gfile behind the four fsspec methods used here."""

    def __init__(self, gfile) -> None:
        self._gfile = gfile

    def open(self, path: str, mode: str):
        return self._gfile.GFile(path, mode)

    def exists(self, path: str) -> bool:
        return self._gfile.exists(path)

    def isdir(self, path: str) -> bool:
        return self._gfile.isdir(path)

    def ls(self, path: str, detail: bool = False) -> list[str]:
        return self._gfile.listdir(path)


def _filesystem(url: str):
    """An fsspec filesystem for the URL's scheme, else TensorFlow's gfile."""
    try:
        import fsspec

        return fsspec.core.url_to_fs(url)[0]
    except ImportError:  # fsspec, or its implementation of this scheme, is not installed
        pass
    try:
        import tensorflow as tf
    except ImportError:
        scheme = url.split("://", 1)[0]
        raise OSError(f"reading {scheme}:// paths needs an fsspec filesystem for them (for "
                      "gs://: pip install 'bert-pretraining-data[gcs]') or TensorFlow; or "
                      "copy the dataset to a local directory") from None
    return _GFileSystem(tf.io.gfile)


@contextlib.contextmanager
def open_binary(path: str) -> Iterator[BinaryIO]:
    """A binary reader of `path`; `.gz` files are decompressed."""
    with (_filesystem(path).open(path, "rb") if is_url(path) else open(path, "rb")) as raw:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw) as unzipped:
                yield unzipped
        else:
            yield raw


def read_bytes(path: str) -> bytes:
    """The whole (decompressed) content of a file."""
    with open_binary(path) as handle:
        return handle.read()


def exists(path: str) -> bool:
    if is_url(path):
        return _filesystem(path).exists(path)
    return posixpath.exists(path)


def is_dir(path: str) -> bool:
    if is_url(path):
        return _filesystem(path).isdir(path)
    return posixpath.isdir(path)


def list_names(directory: str) -> list[str]:
    """The names of what a directory holds, sorted."""
    if is_url(directory):
        found = _filesystem(directory).ls(directory, detail=False)
        return sorted(posixpath.basename(path.rstrip("/")) for path in found)
    return sorted(os.listdir(directory))
