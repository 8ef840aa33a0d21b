"""deploy/Dockerfile read as its instructions, for the tests that hold it to
the CLI, setup.py and the locks."""

from __future__ import annotations

import pathlib


def dockerfile_steps(path: pathlib.Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuations joined and comments dropped."""
    text = path.read_text().replace("\\\n", " ")
    pairs = []
    for line in (line.strip() for line in text.splitlines()):
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            pairs.append((instruction.upper(), " ".join(rest.split())))
    return pairs


def build_args(steps: list[tuple[str, str]]) -> dict[str, str]:
    """The ARGs that have defaults, {name: default}."""
    return dict(a.split("=", 1) for i, a in steps if i == "ARG" and "=" in a)
