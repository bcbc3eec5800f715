"""Released jobs whose GPUs another job took before Slurm launched them (snapshot_builder)."""

from __future__ import annotations

from hopsd.core.model import Configuration
from hopsd.daemon.snapshot_builder import crowded_out
from hopsd.daemon.views import ObservedNode


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
