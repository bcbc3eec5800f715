"""Which jobs a read command or the status page keeps (light: imported at the CLI's start)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobFilter:
    """What a read command keeps; None means no restriction on that field."""

    job_ids: frozenset[int] | None = None
    users: frozenset[str] | None = None
    states: frozenset[str] | None = None
    partitions: frozenset[str] | None = None
