"""hopsd's own CPU per tick on a large queue, without Slurm: the in-memory Slurm of the tests.

The live benchmark (``daemon_tick.py``) times a tick against the test cluster,
where Slurm's answers and their parsing weigh as much as hopsd's own work and
other load on the machine moves the wall times. This one runs the daemon's
tick against the test suite's in-memory Slurm (``daemon_fakeport.FakePort``,
which hands hopsd parsed jobs at once), so what it times is hopsd alone:
reconcile, assembly, the scheduling step and the ledger's writes. A cluster of
``--nodes`` 8-GPU nodes (half k80, half a100) runs ``--running`` one-GPU hops
jobs while ``--pending`` more wait held. After the first tick (adoption) and
the second (its deferred forecast, the first starts), ``--ticks`` ticks two
seconds apart are timed; a round falls about every fifth. Printed: CPU seconds of the
first two ticks, the median of the ticks between rounds and of the round
ticks, and the same median with 10 jobs (the baseline, measured in the same
run) with the ratio.

    .venv/bin/python benchmarks/tick_cpu.py [--running 2000] [--pending 10000] [--json]
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))

from daemon_fakeport import FakeClock, FakeNode, FakePort
from hops_conf import FAKE, merged, render

from hopsd.config import parse_config
from hopsd.daemon.tick import Tick
from hopsd.ledger import migrate
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.slurm.tag import HopsTag

#: Seconds between timed ticks; rounds are ten seconds long here, so one tick in five plans.
TICK_S = 2.0


def fake_daemon(root: Path, nodes: int) -> tuple[Tick, FakePort, FakeClock]:
    """hopsd's tick over a fresh ledger in ``root`` and an in-memory Slurm of ``nodes``
    8-GPU nodes (half k80, half a100), holding no job yet."""
    spool = root / "spool"
    spool.mkdir()
    daemon = {"spool_dir": str(spool), "requeue_quiet_s": 0.0, "checkpoint_grace_s": 0.0}
    config = parse_config(render(merged(FAKE, {"daemon": daemon})))
    url = f"sqlite:///{root / 'ledger.sqlite'}"
    migrate.upgrade(url)
    sessions = make_sessionmaker(make_engine(url, sqlite_begin="immediate"))
    half = max(nodes // 2, 1)
    cluster = [FakeNode(f"slow{i}", "slow", "k80", 8) for i in range(half)]
    cluster += [FakeNode(f"fast{i}", "fast", "a100", 8) for i in range(half)]
    port = FakePort(cluster)
    clock = FakeClock()
    return Tick(config, port, sessions, clock=clock), port, clock


def world(root: Path, nodes: int, running: int, pending: int) -> tuple[Tick, FakeClock]:
    """A tick over a fresh ledger and an in-memory Slurm holding the given jobs."""
    tick, port, clock = fake_daemon(root, nodes)
    names = [n.name for n in port.nodes]
    user = _user()
    for i in range(running):
        node = names[i % len(names)]
        port.add_job(HopsTag((1,), 1e9), user=user, held=False, running_on={node: 1})
    for _ in range(pending):
        port.add_job(HopsTag((1, 2), 1e9), user=user)
    return tick, clock


def _user() -> str:
    """A user the system knows (hopsd's spool refuses others): whoever runs this."""
    return getpass.getuser()


def cpu_of(tick: Tick) -> float:
    started = time.process_time()
    tick.run_once()
    return time.process_time() - started


def measure(nodes: int, running: int, pending: int, ticks: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tick, clock = world(Path(tmp), nodes, running, pending)
        first = cpu_of(tick)
        clock.advance(TICK_S)
        second = cpu_of(tick)
        between: list[float] = []
        rounds: list[float] = []
        for _ in range(ticks):
            clock.advance(TICK_S)
            before = tick.round_clock.last_round_at
            cpu = cpu_of(tick)
            (rounds if tick.round_clock.last_round_at != before else between).append(cpu)
    return {
        "first_tick_cpu_s": round(first, 3),
        "second_tick_cpu_s": round(second, 3),
        "steady_tick_cpu_s": round(statistics.median(between), 3),
        "round_tick_cpu_s": round(statistics.median(rounds), 3) if rounds else 0.0,
        "ticks_cpu_s": [round(c, 2) for c in between + rounds],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300, help="8-GPU nodes (half k80, half a100)")
    parser.add_argument("--running", type=int, default=2000)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--ticks", type=int, default=10, help="timed ticks after the first two")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    big = measure(args.nodes, args.running, args.pending, args.ticks)
    small = measure(args.nodes, 5, 5, args.ticks)
    out: dict[str, Any] = {
        "nodes": args.nodes,
        "running": args.running,
        "pending": args.pending,
        **big,
        "baseline_steady_tick_cpu_s": small["steady_tick_cpu_s"],
        "ratio_steady_to_baseline": round(
            big["steady_tick_cpu_s"] / max(small["steady_tick_cpu_s"], 1e-6), 1
        ),
    }
    text = json.dumps(out, indent=2)
    print(text if args.json else "\n".join(f"{k:28s} {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
