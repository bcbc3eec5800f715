"""How a benchmark prints its figures: one JSON object (``--json``), or a line per figure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def print_figures(
    figures: Mapping[str, Any], as_json: bool, width: int, *, right: bool = False
) -> None:
    """``figures`` as one JSON line, or ``key value`` lines with keys ``width`` wide
    (``right``: right-aligned and followed by a colon)."""
    if as_json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:>{width}}: {value}" if right else f"{key:{width}} {value}")
