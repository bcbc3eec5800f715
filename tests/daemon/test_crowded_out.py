"""Released jobs whose GPUs another job took before Slurm launched them (snapshot_builder,
assemble), and released jobs Slurm launched between the tick's two reads, which are not."""

from __future__ import annotations

from daemon_fakeport import FakePort, small_cluster

from hopsd.core.model import Configuration
from hopsd.daemon.snapshot_builder import crowded_out
from hopsd.daemon.tick import Tick
from hopsd.daemon.views import ObservedNode
from hopsd.ledger.allocations import allocation_history, latest_targets, record_allocation
from hopsd.ledger.models import AllocationReason
from hopsd.slurm.port import SlurmNode
from hopsd.slurm.tag import HopsTag


def on(*parts: tuple[str, int]) -> Configuration:
    return Configuration("v100", parts)


def test_a_release_whose_gpus_another_job_took_is_crowded_out_in_order():
    # v100n1: 4 GPUs, 3 used: 1 by a running hops job, 2 by another user's job
    nodes = [
        ObservedNode("v100n1", "v100", 4, gpus_used=3),
        ObservedNode("v100n2", "v100", 4, gpus_used=0),
    ]
    targets = {"a": on(("v100n1", 1)), "b": on(("v100n1", 1)), "c": on(("v100n2", 4))}
    assert crowded_out(targets, nodes, {"v100n1": 1}) == {"b"}
    # the other job gone: both fit again
    nodes[0] = ObservedNode("v100n1", "v100", 4, gpus_used=1)
    assert crowded_out(targets, nodes, {"v100n1": 1}) == set()
    # a target spanning nodes is crowded out by either
    assert crowded_out({"d": on(("v100n1", 4), ("v100n2", 1))}, nodes, {"v100n1": 1}) == {"d"}


def test_a_release_onto_a_node_that_went_down_or_was_drained_is_crowded_out():
    nodes = [ObservedNode("v100n1", "v100", 4, usable=False), ObservedNode("v100n2", "v100", 4)]
    targets = {"a": on(("v100n1", 1)), "b": on(("v100n2", 2))}
    assert crowded_out(targets, nodes, {}) == {"a"}


class LaunchesLater(FakePort):
    """Slurm launches a released job on its own time, here right before the tick's node
    read: the queue read saw it pending, the node read sees its GPUs taken."""

    def __init__(self) -> None:
        super().__init__(small_cluster())
        self.launch_before_node_read = True

    def release(self, job_id: int) -> None:
        job = self._act("release", job_id)
        job.held = job.user_hold = False

    def list_nodes(self) -> list[SlurmNode]:
        if self.launch_before_node_read:
            self._schedule()
        return super().list_nodes()


def target_of(sessions, job: int) -> dict[str, int]:  # type: ignore[no-untyped-def]
    with sessions.begin() as s:
        config = latest_targets(s, [str(job)])[str(job)]
    return dict(config.parts)


def released(config, sessions, clock, launch_before_node_read):  # type: ignore[no-untyped-def]
    """A 4-GPU job hopsd adopted, placed and released in one tick, not launched yet."""
    port = LaunchesLater()
    port.launch_before_node_read = launch_before_node_read
    job = port.add_job(HopsTag((4,), 100_000))
    tick = Tick(config, port, sessions, clock=clock)
    tick.run_once()
    assert port.actions(job) == ["update", "release"] and port.jobs[job].state == "PENDING"
    return port, job, tick


def test_a_release_launched_between_the_two_reads_is_not_planned_again(config, sessions, clock):
    port, job, tick = released(config, sessions, clock, launch_before_node_read=True)
    for _ in range(3):
        clock.advance(1)
        tick.run_once()
    # launched where hops put it, between the queue read (pending) and the node read
    # (its GPUs taken): hops neither held it again nor placed it elsewhere
    assert port.jobs[job].state == "RUNNING"
    assert port.actions(job) == ["update", "release"]
    assert target_of(sessions, job) == port.jobs[job].placement


def test_a_release_whose_gpus_stay_taken_is_planned_again(config, sessions, clock):
    port, job, tick = released(config, sessions, clock, launch_before_node_read=False)
    first = dict(port.jobs[job].target)
    # another user's job takes those GPUs before Slurm launches the released one
    port.add_job(None, held=False, running_on=first)
    clock.advance(10)  # a round is due
    seen = tick.run_once()  # one observation of the crowding: not yet planned again
    assert port.actions(job) == ["update", "release"]
    # ... nor counted on the GPUs the other job holds: it sits the round out (it is the
    # only hops job, so the round has nothing to plan)
    planned = seen.decision.planned if seen.decision is not None else None
    assert planned is None or str(job) not in {j.id for j in planned.jobs}
    clock.advance(1)
    tick.run_once()  # the crowding lasts: held, placed elsewhere, released
    assert port.actions(job) == ["update", "release", "hold", "update", "release"]
    assert set(port.jobs[job].target).isdisjoint(first)
    assert target_of(sessions, job) == port.jobs[job].target


def test_a_start_that_lands_where_an_earlier_release_put_it_is_recorded_there(
    config, sessions, clock
):
    port, job, tick = released(config, sessions, clock, launch_before_node_read=False)
    released_to = dict(port.jobs[job].target)
    elsewhere = next(n.name for n in port.nodes if n.name not in released_to)
    # hops placed it anew, but Slurm launched the earlier release before that took
    with sessions.begin() as s:
        again = Configuration(port.nodes[0].gpu_type, ((elsewhere, 4),))
        record_allocation(s, None, str(job), AllocationReason.START, again, clock())
    port._schedule()
    clock.advance(1)
    tick.run_once()
    assert port.jobs[job].state == "RUNNING" and port.jobs[job].placement == released_to
    with sessions.begin() as s:
        last = allocation_history(s, str(job))[-1]
    assert last.reason == AllocationReason.KEEP
    assert {str(n): int(g) for n, g in last.parts or []} == released_to
