"""Reading a simulation input file, its failure told as the caller's own error."""

from __future__ import annotations

from pathlib import Path

from hopsd.core.errors import InvalidInputError


def read_input(path: Path, error: type[InvalidInputError]) -> str:
    """The file's text; an unreadable file raises ``error`` naming it (one line for the user)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from exc
