"""Reading GRES and TRES strings, the way Slurm prints GPU counts everywhere.

Shapes handled: ``gpu:a100:4``, ``gpu:4``, ``gpu:a100:2(IDX:0-1)``,
``gpu:a100:0(IDX:N/A)``, ``gpu:a100:4(S:0-1)``, lists such as
``gpu:a100:2,shard:4``, requests ``gres:gpu:2`` / ``gres/gpu:2`` and TRES
lists ``cpu=2,gres/gpu=4,gres/gpu:v100=4``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ITEM_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+)(?::(?P<type>[A-Za-z0-9_.-]+?))?(?::(?P<count>\d+)[KMG]?)?"
    r"(?:\((?P<annot>[^)]*)\))?$"
)


@dataclass(frozen=True, slots=True)
class GresItem:
    """One GRES entry: name (``gpu``), optional type, count and device indexes if printed."""

    name: str
    gpu_type: str | None
    count: int
    indexes: tuple[int, ...] = ()


def split_items(text: str) -> list[str]:
    """Split a GRES list on commas that are not inside ``( )`` annotations."""
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return [i.strip() for i in items if i.strip()]


def parse_item(text: str) -> GresItem | None:
    """Parse one GRES entry; ``None`` for empty or unreadable text."""
    text = text.strip()
    for prefix in ("gres:", "gres/"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    if not text or text in ("(null)", "N/A"):
        return None
    match = _ITEM_RE.match(text)
    if match is None:
        return None
    gtype = match.group("type")
    count_text = match.group("count")
    if count_text is None and gtype is not None and gtype.isdigit():
        gtype, count_text = None, gtype
    count = int(count_text) if count_text is not None else 1
    return GresItem(match.group("name"), gtype, count, _indexes(match.group("annot") or ""))


def gpu_items(text: str | None) -> list[GresItem]:
    """All ``gpu`` entries of a GRES list."""
    if not text:
        return []
    items = (parse_item(i) for i in split_items(text))
    return [i for i in items if i is not None and i.name == "gpu"]


def gpu_count(text: str | None) -> int:
    """Total GPUs named in a GRES list or request (``gres:gpu:2`` -> 2)."""
    return sum(i.count for i in gpu_items(text))


def gpu_type(text: str | None) -> str | None:
    """The GPU type named in a GRES list, if exactly one is named."""
    types = {i.gpu_type for i in gpu_items(text) if i.gpu_type}
    return types.pop() if len(types) == 1 else None


def tres_gpus(tres: str | None) -> int:
    """GPUs in a TRES list (``...,gres/gpu=4,gres/gpu:v100=4`` -> 4)."""
    for part in (tres or "").split(","):
        key, _, value = part.partition("=")
        if key.strip() == "gres/gpu" and value.strip().isdigit():
            return int(value)
    return 0


def tres_dict(tres: str | None) -> dict[str, str]:
    """A TRES list as a mapping ``{"cpu": "2", "gres/gpu": "4", ...}``."""
    out: dict[str, str] = {}
    for part in (tres or "").split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def _indexes(annotation: str) -> tuple[int, ...]:
    """Device indexes of an ``IDX:0-1,3`` annotation (empty for ``N/A`` or no IDX)."""
    if not annotation.startswith("IDX:"):
        return ()
    out: list[int] = []
    for part in annotation[4:].split(","):
        low, _, high = part.partition("-")
        if not low.isdigit():
            return ()
        end = int(high) if high.isdigit() else int(low)
        out.extend(range(int(low), end + 1))
    return tuple(out)
