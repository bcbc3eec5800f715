"""Reading values whose JSON shape changed between Slurm releases.

22.05 (openapi v0.0.38) prints plain numbers and strings; 23.02+ (data_parser)
wraps numbers as ``{"set": .., "infinite": .., "number": ..}``, turns states
into lists and nests some objects. These helpers accept both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hopsd.slurm.errors import SlurmParseError, SlurmUnavailableError

# A time of 0 or Slurm's NO_VAL/INFINITE sentinels means "not set".
UNSET_NUMBERS = frozenset({0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF})


def load_document(text: str, source: str) -> dict[str, Any]:
    """Parse a ``--json`` reply and refuse one that reports errors.

    22.05 ``squeue --json`` and ``sinfo --json`` exit 0 with an empty list and
    an ``errors`` entry when slurmctld is down; taking that at face value would
    read as "the cluster is empty", so it is raised as unavailability.
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SlurmParseError(f"{source}: reply is not JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise SlurmParseError(f"{source}: reply is not a JSON object")
    errors = [e for e in doc.get("errors") or [] if e]
    if errors:
        raise SlurmUnavailableError(f"{source} reported errors: {_describe(errors)}")
    return doc


def number(value: Any) -> float | None:
    """A number in either shape; ``None`` when unset, infinite or absent."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def integer(value: Any, default: int = 0) -> int:
    got = number(value)
    return default if got is None else int(got)


def timestamp(value: Any) -> float | None:
    """Epoch seconds, ``None`` for 0 and Slurm's sentinel values."""
    got = number(value)
    if got is None or got <= 0 or int(got) in UNSET_NUMBERS:
        return None
    return got


def text(value: Any) -> str:
    """A string field; ``None`` and non-strings become ``""``."""
    return value if isinstance(value, str) else ""


def states(value: Any) -> tuple[str, ...]:
    """A state as a tuple of upper-case words (``"RUNNING"``, ``["PENDING", "REQUEUED"]``)."""
    if isinstance(value, str):
        return tuple(w.upper() for w in value.replace("+", " ").split() if w)
    if isinstance(value, list):
        return tuple(str(w).upper() for w in value if isinstance(w, str) and w)
    if isinstance(value, Mapping):
        return states(value.get("current"))
    return ()


def mapping(value: Any) -> Mapping[str, Any]:
    """A nested object, or an empty one when absent or of another type."""
    return value if isinstance(value, Mapping) else {}


def mappings(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a list (anything else in it skipped), none when it is no list."""
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def string_list(value: Any) -> tuple[str, ...]:
    """A list of strings, or a comma-separated string, as a tuple."""
    if isinstance(value, str):
        return tuple(p for p in value.split(",") if p)
    if isinstance(value, list):
        return tuple(str(p) for p in value if isinstance(p, str) and p)
    return ()


def _describe(errors: list[Any]) -> str:
    parts = []
    for err in errors:
        if isinstance(err, Mapping):
            bits = [str(err.get(k)) for k in ("source", "description", "error") if err.get(k)]
            parts.append(": ".join(bits) or json.dumps(err))
        else:
            parts.append(str(err))
    return "; ".join(parts)
