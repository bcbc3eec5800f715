"""Fixtures of the sensing tests: a fake clock, and the daemon tests' helpers on the path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
