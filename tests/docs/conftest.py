"""The documentation's live test drives hopsd with the live daemon tests' helpers
(tests/daemon)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
