"""Reservations from ``scontrol -o show reservation``, on output recorded from the test cluster."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.parse_reservations import parse_reservations
from hopsd.slurm.reservations import read_reservations
from hopsd.slurm.runner import CompletedRun

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def local(text: str) -> float:
    """Slurm prints reservation times in the local zone of the host that runs scontrol."""
    return dt.datetime.fromisoformat(text).timestamp()


def test_two_maintenance_reservations_with_their_windows_and_nodes():
    found = parse_reservations((FIXTURES / "scontrol_reservations.22.05.txt").read_text())
    assert [r.name for r in found] == ["maint_test", "two"]
    first, second = found
    assert first.start == local("2026-12-06T09:21:31") and first.end == first.start + 1800
    assert first.nodes == ("v100n1",) and first.users == ("root",) and first.state == "INACTIVE"
    assert first.flags == ("MAINT", "SPEC_NODES")
    assert second.nodes == ("a100n1", "a100n2")  # the node range is expanded
    assert second.end - second.start == 3600 and "IGNORE_JOBS" in second.flags


def test_an_active_reservation_and_none_at_all():
    found = parse_reservations((FIXTURES / "scontrol_reservations_active.22.05.txt").read_text())
    assert [(r.name, r.state) for r in found] == [("maint_test", "INACTIVE"), ("now_k80", "ACTIVE")]
    assert parse_reservations((FIXTURES / "scontrol_reservations_none.22.05.txt").read_text()) == []


def test_unreadable_times_or_nodes_are_left_out_not_guessed():
    text = (
        "ReservationName=a StartTime=Unknown EndTime=2026-12-06T10:31:34 Nodes=x1\n"
        "ReservationName=b StartTime=2026-12-06T09:31:34 EndTime=2026-12-06T10:31:34 "
        "Nodes=(null) Flags=MAINT\n"
    )
    found = parse_reservations(text)
    assert [(r.name, r.nodes) for r in found] == [("b", ())]


def test_the_cli_backend_reads_them_in_one_call_and_other_backends_say_none():
    calls: list[Sequence[str]] = []
    text = (FIXTURES / "scontrol_reservations.22.05.txt").read_text()

    def run(argv: Sequence[str], timeout: float) -> CompletedRun:
        calls.append(list(argv))
        return CompletedRun(tuple(argv), 0, text, "")

    assert len(read_reservations(CliSlurm(run=run)) or []) == 2
    assert calls == [["scontrol", "-o", "show", "reservation"]]
    assert read_reservations(object()) is None
