"""hopsd and the simulator enact moves under a notice's grace alike: same actions, same instants.

The scenario: one slow k80 node and one fast a100 node; job Y runs on the k80s
and gains 8x on the a100s, which are free, so the round at t0 moves it. Both
worlds give Y its checkpoint notice at t0 and let it run on for the grace,
its target reserved: job Z, queued at t0 + 10, is given neither Y's GPUs nor
its target. When the grace is over (t0 + 30) Y is requeued and released onto
the a100s first, then the round of that instant gives Z the k80s Y left (hopsd
takes pending chains before it decides). Rounds are 10 s long and hopsd ticks
once a round, so every action falls on a round's instant.

A second scenario preempts a job under notice for one released onto its GPUs
at once (Slurm starts it once they are free), with a policy both worlds run.

hopsd runs on the in-memory Slurm (:mod:`daemon_fakeport`); the simulator
starts at t0 from Y running where hopsd runs it, knowing the throughputs hopsd
was told. Neither world's Y reports a checkpoint, so both wait the whole grace.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
from daemon_fakeport import FakeClock, FakeNode, FakePort, a100_pays_8x
from sqlalchemy.orm import Session, sessionmaker
from test_notice import daemon, report

from hopsd.config import HopsConfig
from hopsd.core.model import Assignment, Cluster, Configuration, Plan
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.throughput import InMemoryThroughputStore
from hopsd.daemon.observe import observe
from hopsd.daemon.snapshot_builder import build_cluster_view
from hopsd.plugins import get_policy
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.state import Resumed
from hopsd.sim.truth import GroundTruth, ModelSpec
from hopsd.sim.workload import JobSpec
from hopsd.slurm.tag import HopsTag

GRACE = 30.0
ROUND = 10.0  # the fake cluster's round; hopsd ticks once a round here
SAMPLES = 1e7  # neither job ends within the scenario
#: Slurm's calls as the simulator names them
ACTIONS = {"signal": "notice", "requeue_hold": "requeue", "release": "release"}

Event = tuple[float, str, str]


class Recording(FakePort):
    """The in-memory Slurm, writing down when hopsd signals, requeues and releases a job."""

    def __init__(self, nodes: list[FakeNode], clock: FakeClock) -> None:
        super().__init__(nodes)
        self.clock = clock
        self.events: list[tuple[float, int, str]] = []

    def _act(self, action: str, job_id: int):  # type: ignore[no-untyped-def]
        job = super()._act(action, job_id)
        if action in ACTIONS:
            self.events.append((self.clock(), job_id, ACTIONS[action]))
        return job


def nodes() -> list[FakeNode]:
    return [FakeNode("slow1", "slow", "k80", 4), FakeNode("fast1", "fast", "a100", 4)]


def through_hopsd(
    config: HopsConfig, sessions: sessionmaker[Session], clock: FakeClock
) -> tuple[list[Event], float, Cluster]:
    """The scenario through hopsd's tick: its actions from t0 on (Y and Z named), and t0."""
    config = dataclasses.replace(config, checkpoint_grace_s=GRACE)
    port = Recording(nodes(), clock)
    foreign = port.add_job(None, held=False, running_on={"fast1": 4})
    y = port.add_job(HopsTag((4,), SAMPLES), submit_time=clock())
    tick = daemon(config, port, sessions, clock)
    tick.run_once()
    assert port.jobs[y].placement == {"slow1": 4}
    a100_pays_8x(sessions, clock, y, (4,))
    # Y's probe reported its run's start: it can take the notice
    report(config, y, "slow1", [{"seq": 1, "at": clock(), "kind": "start", "startup_s": 4.0}])
    tick.run_once()
    port.finish(foreign)
    clock.advance(ROUND + 1)  # the next round: the a100s are free
    t0 = clock()
    cluster = build_cluster_view(observe(port, clock).nodes, config, {}).cluster
    tick.run_once()
    clock.advance(ROUND)
    z = port.add_job(HopsTag((4,), SAMPLES), submit_time=clock())
    for _ in range(4):  # t0 + 10 .. t0 + 40
        tick.run_once()
        clock.advance(ROUND)
    names = {y: "y", z: "z"}
    events = [(at - t0, names[job], what) for at, job, what in port.events if at >= t0]
    return events, t0, cluster


def through_the_simulator(
    t0: float, cluster: Cluster, settings: Settings, spare_guard_s: float
) -> list[Event]:
    """The same scenario in the simulator, from t0: Y running on the k80s, Z due at t0 + 10."""
    model = ModelSpec("m", 1e3, 10, {"k80": 10.0, "a100": 80.0})
    truth = GroundTruth(cluster, {"m": model})
    jobs = [
        JobSpec("y", t0 - 11.0, (4,), SAMPLES, "m"),
        JobSpec("z", t0 + ROUND, (4,), SAMPLES, "m"),
    ]
    store = InMemoryThroughputStore()  # what hopsd was told of Y (a100_pays_8x)
    store.set_type_aggregated("y", "k80", 4, 10.0)
    store.set_type_aggregated("y", "a100", 4, 80.0)
    on_k80 = Configuration("k80", (("slow1", 4),))
    config = EngineConfig(
        settings=settings,  # hopsd's
        profile_s=0.0,
        profile_noise=0.0,
        measure_noise=0.0,
        measure_after_s=1e9,
        spare_guard_s=spare_guard_s,  # hopsd's
        solver_by_work=False,
        start_s=t0,
        first_round_s=t0,
        partial=True,
        max_rounds=5,
        notice_grace_s=GRACE,
    )
    resumed = {"y": Resumed("running", has_run=True, config=on_k80)}
    engine = Engine(truth, jobs, get_policy("hops"), config, resumed=resumed, store=store)
    engine.run()
    return [(at - t0, job, what) for at, job, what in engine.events if at <= t0 + 4 * ROUND]


def test_a_move_under_notice_is_the_same_in_hopsd_and_in_the_simulator(
    config: HopsConfig, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    live, t0, cluster = through_hopsd(config, sessions, clock)
    expected = [
        (0.0, "y", "notice"),
        (30.0, "y", "requeue"),
        (30.0, "y", "release"),
        (30.0, "z", "release"),
    ]
    assert live == expected
    assert through_the_simulator(t0, cluster, config.settings(), config.spare_guard_s) == expected


class Displacing:
    """Starts a waiting job on the first node while nothing runs, then, once, preempts the
    running job for the next waiting one, on the same GPUs (a policy for both worlds)."""

    name = "displacing"

    def __init__(self) -> None:
        self.done = False

    def plan(self, snapshot: Snapshot, settings: Settings) -> Plan:
        queued, running = snapshot.queued, snapshot.running
        if not queued or self.done:
            return Plan()
        if not running:
            node = snapshot.cluster.nodes[0]
            where = Configuration(node.gpu_type, ((node.id, node.gpus),))
            return Plan(start=(Assignment(queued[0].id, where),))
        self.done = True
        old = running[0]
        assert old.current is not None
        return Plan(start=(Assignment(queued[0].id, old.current),), preempt=(old.id,))

    def plan_fragment(self, snapshot: Snapshot, settings: Settings) -> Plan:
        return Plan()


def test_a_preemption_under_notice_with_a_start_in_its_place_is_the_same_in_both(
    config: HopsConfig,
    sessions: sessionmaker[Session],
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A runs on the k80s; at t0 it is preempted for B, released onto A's GPUs at once (Slurm
    starts B once A has left); A is requeued at t0 + 30. Meanwhile hopsd plans every round:
    B waits on GPUs A still holds, and they are counted once."""
    config = dataclasses.replace(config, checkpoint_grace_s=GRACE)
    port = Recording(nodes(), clock)
    a = port.add_job(HopsTag((4,), SAMPLES), submit_time=clock())
    tick = daemon(config, port, sessions, clock)
    tick.policy = Displacing()
    tick.run_once()
    report(config, a, "slow1", [{"seq": 1, "at": clock(), "kind": "start", "startup_s": 4.0}])
    tick.run_once()
    clock.advance(ROUND)
    t0 = clock()
    b = port.add_job(HopsTag((4,), SAMPLES), submit_time=clock())
    caplog.set_level(logging.ERROR, logger="hopsd")
    for _ in range(4):  # t0 .. t0 + 30
        tick.run_once()
        clock.advance(ROUND)
    # no round fails on GPUs handed out twice (a round with nothing to plan may be idle)
    assert not [r for r in caplog.records if "plan-failed" in r.getMessage()]
    assert port.jobs[b].placement == {"slow1": 4}
    names = {a: "a", b: "b"}
    live = [(at - t0, names[job], what) for at, job, what in port.events if at >= t0]
    expected = [(0.0, "b", "release"), (0.0, "a", "notice"), (30.0, "a", "requeue")]
    assert live == expected

    cluster = build_cluster_view(observe(port, clock).nodes, config, {}).cluster
    model = ModelSpec("m", 1e3, 10, {"k80": 10.0, "a100": 80.0})
    jobs = [JobSpec("a", t0 - ROUND, (4,), SAMPLES, "m"), JobSpec("b", t0, (4,), SAMPLES, "m")]
    on_k80 = Configuration("k80", (("slow1", 4),))
    resumed = {"a": Resumed("running", has_run=True, config=on_k80), "b": Resumed("queued")}
    sim_config = EngineConfig(
        settings=config.settings(), profile_s=0.0, spare_guard_s=config.spare_guard_s,
        solver_by_work=False,
        start_s=t0, first_round_s=t0, partial=True, max_rounds=4, notice_grace_s=GRACE,
    )  # fmt: skip
    truth = GroundTruth(cluster, {"m": model})
    engine = Engine(truth, jobs, Displacing(), sim_config, resumed=resumed)
    engine.run()
    assert [(at - t0, job, what) for at, job, what in engine.events] == expected
