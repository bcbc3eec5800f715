"""Slurm output recorded on the test clusters (``tests/fixtures/slurm``), read as text."""

from __future__ import annotations

import lzma
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def recorded(name: str) -> str:
    """The recorded file ``name``, decompressed when it ends in ``.xz``."""
    path = FIXTURES / name
    if path.suffix == ".xz":
        return lzma.decompress(path.read_bytes()).decode()
    return path.read_text()
