"""Suite-wide pytest configuration.

Live tests need the Slurm test cluster (``docker/cluster.sh up`` exports
``SLURM_CONF``) or PostgreSQL on 127.0.0.1:5432; they skip with the reason when
run outside ``scripts/test.sh``, which brings up both before running pytest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy.orm import Session, sessionmaker

from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.models import Base


@pytest.fixture
def sessions(tmp_path: Path) -> sessionmaker[Session]:
    """A fresh SQLite ledger (schema from the models) for the daemon and sensing tests."""
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}", sqlite_begin="immediate")
    Base.metadata.create_all(engine)
    return make_sessionmaker(engine)


@pytest.fixture
def set_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Sets this process's local time zone (a POSIX ``TZ``) for the test; the machine's after."""

    def set_to(zone: str) -> None:
        monkeypatch.setenv("TZ", zone)
        time.tzset()

    yield set_to
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def utc(set_zone: Callable[[str], None]) -> None:
    """Read Slurm's local times (recorded output) as UTC, whatever the machine's zone."""
    set_zone("UTC")


# Slurm 22.05 can leave a job COMPLETING for good when it is cancelled in the
# second its batch script is being launched ("Job N already killed, do not
# launch batch job" on the node, and no completion ever reaches slurmctld).
# Such a job holds its node's GPUs for every later live test. Before each live
# test the cluster is given time to finish what earlier tests cancelled; a job
# still completing after that is cleared the way an admin would (its node down,
# then resumed), and the test then starts on a clean cluster.
SETTLE_S = 20.0


def _completing_nodes() -> set[str]:
    import subprocess

    out = subprocess.run(
        ["squeue", "-h", "-t", "CG", "-o", "%N"], capture_output=True, text=True, timeout=20
    )
    if out.returncode != 0:
        return set()
    nodes: set[str] = set()
    for line in out.stdout.split():
        expanded = subprocess.run(
            ["scontrol", "show", "hostnames", line], capture_output=True, text=True, timeout=20
        )
        nodes.update(expanded.stdout.split())
    return nodes


@pytest.fixture(autouse=True)
def _settled_cluster(request: pytest.FixtureRequest) -> None:
    import os
    import subprocess

    if request.node.get_closest_marker("slurm") is None or not os.environ.get("SLURM_CONF"):
        return
    end = time.monotonic() + SETTLE_S
    stuck = _completing_nodes()
    while stuck and time.monotonic() < end:
        time.sleep(1.0)
        stuck = _completing_nodes()
    for node in sorted(stuck):
        for state in ("down reason=hops-test-stuck-completing", "resume"):
            subprocess.run(
                ["scontrol", "update", f"nodename={node}", *state.split()],
                capture_output=True,
                timeout=20,
            )
    _restore_nodes_and_reservations()


# A node an earlier test left drained or down (Slurm drains a node itself when a
# step outlives UnkillableStepTimeout on a loaded machine; a restarted slurmd may
# not have registered yet), or a reservation left behind, would fail a later test
# that names the node. Each is put back before the next live test, with a warning
# that says what was found, so the test that left it can be told from the one hit.
def _unavailable_nodes() -> dict[str, str]:
    import subprocess

    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N|%t|%E"], capture_output=True, text=True, timeout=20
    )
    found: dict[str, str] = {}
    for line in out.stdout.splitlines():
        node, state, reason = [*line.split("|", 2), "", ""][:3]
        if any(s in state for s in ("drain", "drng", "down", "fail")):
            found[node] = f"{state} ({reason})"
    return found


def _restart_dead_slurmds(found: dict[str, str]) -> None:
    """Start again the slurmd of a node not responding whose slurmd is gone (the test
    cluster's ``ReturnToService=2`` then brings the node back when it registers)."""
    import sys
    import warnings

    if not any("*" in state for state in found.values()):
        return
    helpers = str(Path(__file__).parent / "daemon")
    if helpers not in sys.path:
        sys.path.insert(0, helpers)
    from centre_live import power_on, slurmd_alive

    for node, state in sorted(found.items()):
        if "*" in state and not slurmd_alive(node):
            warnings.warn(f"live tests: slurmd of {node} ({state}) was gone, started", stacklevel=1)
            power_on(node)


def _restore_nodes_and_reservations() -> None:
    import subprocess
    import warnings

    names = subprocess.run(
        ["scontrol", "-o", "show", "reservation"], capture_output=True, text=True, timeout=20
    ).stdout
    for line in names.splitlines():
        if line.startswith("ReservationName="):
            name = line.split()[0].partition("=")[2]
            warnings.warn(f"live tests: reservation {name} left behind, deleted", stacklevel=1)
            subprocess.run(
                ["scontrol", "delete", f"reservation={name}"], capture_output=True, timeout=20
            )
    end = time.monotonic() + SETTLE_S
    found = _unavailable_nodes()
    _restart_dead_slurmds(found)
    while found and time.monotonic() < end:
        for node, state in sorted(found.items()):
            if "*" not in state:  # not responding: its slurmd registers on its own first
                subprocess.run(
                    ["scontrol", "update", f"nodename={node}", "state=resume"],
                    capture_output=True,
                    timeout=20,
                )
        time.sleep(1.0)
        left = _unavailable_nodes()
        for node in sorted(set(found) - set(left)):
            warnings.warn(f"live tests: node {node} was {found[node]}, resumed", stacklevel=1)
        found = left
    if found:
        warnings.warn(f"live tests: nodes still unavailable: {found}", stacklevel=1)


# Hypothesis's per-example deadline is a timer: on a loaded machine a 0.03 ms
# example can take 0.3 s and fail a property that holds. Properties are checked
# here, speed is measured in benchmarks/.
hypothesis_settings.register_profile("hops", deadline=None)
hypothesis_settings.load_profile("hops")
