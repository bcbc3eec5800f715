"""A sweep's cells as written, for comparing two runs of the same sweep.

A cell is a function of its inputs and seed: two runs (local processes, a Slurm
job array) must write the same cells but for the planning wall time. The live
sweep test and ``benchmarks/sweep_speed.py`` compare them through this.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def cell_docs(root: Path) -> dict[str, dict[str, Any]]:
    """Every cell file's content, wall time left out, by its path in the results."""
    out = {}
    for path in sorted((root / "cells").rglob("*.json")):
        doc = json.loads(path.read_text())
        doc["figures"].pop("wall_s")
        out[path.relative_to(root).as_posix()] = doc
    return out
