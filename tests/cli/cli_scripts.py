"""Batch scripts the CLI tests submit."""

from __future__ import annotations

from pathlib import Path


def train_script(tmp_path: Path) -> Path:
    """An executable ``train.sh`` in ``tmp_path`` that runs ``python train.py``."""
    path = tmp_path / "train.sh"
    path.write_text("#!/bin/bash\npython train.py\n")
    path.chmod(0o755)
    return path
