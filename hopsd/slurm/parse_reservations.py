"""Reservations from ``scontrol -o show reservation``: one ``Key=Value`` line each.

22.05's ``scontrol`` has no JSON for reservations, and the one-line form is the
same in later releases. Times are printed in the local time zone of the host
that runs ``scontrol`` (hopsd's own), without a zone: they are read back in it.
A reservation naming no nodes (a partition-wide or core-count one) gives an
empty node tuple.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import hostlist

NO_RESERVATIONS = "No reservations in the system"


@dataclass(frozen=True, slots=True)
class SlurmReservation:
    """One reservation: its window (epoch seconds), nodes, flags, users and state."""

    name: str
    start: float
    end: float
    nodes: tuple[str, ...]
    flags: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    state: str = ""


def parse_reservations(text: str) -> list[SlurmReservation]:
    """Every reservation of the command's output (none for Slurm's "No reservations")."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("ReservationName="):
            continue
        found = _reservation(_fields(line))
        if found is not None:
            out.append(found)
    return out


def _fields(line: str) -> dict[str, str]:
    """``Key=Value`` words; a value may itself hold ``=`` (``TRES=cpu=8``)."""
    out: dict[str, str] = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep:
            out[key] = value
    return out


def _reservation(fields: dict[str, str]) -> SlurmReservation | None:
    start = _time(fields.get("StartTime", ""))
    end = _time(fields.get("EndTime", ""))
    if start is None or end is None:
        return None
    return SlurmReservation(
        name=fields.get("ReservationName", ""),
        start=start,
        end=end,
        nodes=_nodes(fields.get("Nodes", "")),
        flags=_words(fields.get("Flags", "")),
        users=_words(fields.get("Users", "")),
        state=fields.get("State", ""),
    )


def _time(text: str) -> float | None:
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        return None


def _nodes(text: str) -> tuple[str, ...]:
    if not text or text == "(null)":
        return ()
    try:
        return tuple(hostlist.expand_hostlist(text))
    except hostlist.BadHostlist:
        return ()


def _words(text: str) -> tuple[str, ...]:
    if not text or text == "(null)":
        return ()
    return tuple(w for w in text.split(",") if w)
