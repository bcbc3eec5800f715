"""A hops-tagged job sent to a partition with none of the managed nodes is left to Slurm.

The live test (``test_live_partitions.py``) runs it on the real cluster; here
the rule itself and one tick of the in-memory Slurm.
"""

from __future__ import annotations

from hopsd.daemon.adoption import entry_partitions, outside_managed
from hopsd.daemon.tick import Tick
from hopsd.daemon.views import ObservedJob, ObservedNode
from hopsd.slurm.tag import HopsTag

NODES = (
    ObservedNode("v1", "v100", 4, 0, ("v100", "all")),
    ObservedNode("k1", "k80", 2, 0, ("k80", "all")),
    ObservedNode("c1", "", 0, 0, ("cpu",)),
)


def job_in(partition: str) -> ObservedJob:
    return ObservedJob(7, "alice", "acct", "PENDING", partition=partition)


def test_partitions_sharing_a_managed_node_take_hops_jobs_others_do_not() -> None:
    entry = entry_partitions(NODES, {"v1": "v100"})
    assert entry == {"v100", "all"}
    for partition in ("v100", "all", "k80,all", ""):  # "": Slurm did not say; adopted
        assert outside_managed(job_in(partition), entry) == "", partition
    for partition in ("k80", "cpu", "k80,cpu"):
        why = outside_managed(job_in(partition), entry)
        assert partition in why and "left to Slurm" in why, why


def test_a_tagged_job_in_an_unmanaged_partition_is_refused_and_never_touched(  # type: ignore[no-untyped-def]
    config, port, sessions, clock
):
    held = port.add_job(HopsTag((1,), 1000), user_hold=True)
    port.jobs[held].partition = "cpu"
    running = port.add_job(HopsTag((1,), 1000), held=False, running_on={"slow1": 1})
    port.jobs[running].partition = "cpu"
    result = Tick(config, port, sessions, clock=clock).run_once()
    assert result.reconcile is not None
    assert sorted(j for j, _ in result.reconcile.rejected) == sorted([held, running])
    assert port.actions(held) == [] and port.actions(running) == []
    assert result.reconcile.adopted == []
