"""Local and gs:// files for the loaders, without Beam.

Training jobs should not need the pipeline's runtime: local paths use plain
`open`, and URLs (gs://, s3://, ...) go through TensorFlow's `tf.io.gfile`,
imported only when a URL is given. `.gz` files are decompressed on the fly.
"""

from __future__ import annotations

import contextlib
import gzip
import posixpath
from typing import BinaryIO, Iterator

join = posixpath.join
dirname = posixpath.dirname
basename = posixpath.basename


def is_url(path: str) -> bool:
    return "://" in path


def _gfile():
    try:
        import tensorflow as tf
    except ImportError:  # pragma: no cover - TensorFlow is a core dependency
        raise OSError("reading gs:// (or other URL) paths needs TensorFlow's tf.io.gfile; "
                      "install tensorflow or copy the dataset to a local directory") from None
    return tf.io.gfile


@contextlib.contextmanager
def open_binary(path: str) -> Iterator[BinaryIO]:
    """A binary reader of `path`; `.gz` files are decompressed."""
    with (_gfile().GFile(path, "rb") if is_url(path) else open(path, "rb")) as raw:
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
        return _gfile().exists(path)
    return posixpath.exists(path)


def is_dir(path: str) -> bool:
    if is_url(path):
        return _gfile().isdir(path)
    return posixpath.isdir(path)
