"""What the sinfo fixtures of every Slurm version say about the test cluster's nodes."""

from __future__ import annotations

from hopsd.slurm.parse_sinfo import parse_nodes
from hopsd.slurm.port import SlurmNode


def five_nodes(text: str) -> dict[str, SlurmNode]:
    """The parsed nodes by name, checked: the five nodes, v100n1 mixed with 3 of 4 GPUs taken."""
    nodes = {n.name: n for n in parse_nodes(text)}
    assert sorted(nodes) == ["a100n1", "a100n2", "k80n1", "v100n1", "v100n2"]
    v1 = nodes["v100n1"]
    assert (v1.gpu_type, v1.gpus_total, v1.gpus_alloc, v1.gpus_free) == ("v100", 4, 3, 1)
    assert v1.partitions == ("all", "v100") and v1.state == "MIXED" and v1.usable
    return nodes
