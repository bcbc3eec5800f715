"""Nodes from ``sinfo --json`` (22.05: one record per node) and newer node JSON.

Accepted shapes: a top-level ``nodes`` list (22.05 ``sinfo --json``; 23.02+
``scontrol show nodes --json`` and slurmrestd) with ``gres``/``gres_used``
strings and a state string or list; and the 23.02+ ``sinfo --json`` ``sinfo``
list of groups, each naming its nodes, with ``gres.total``/``gres.used``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hopsd.slurm import gres, jsonshape
from hopsd.slurm.port import SlurmNode


def parse_nodes(text: str) -> list[SlurmNode]:
    """All nodes of a node JSON reply, merged by name, sorted by name."""
    return nodes_from_document(jsonshape.load_document(text, "sinfo --json"))


def nodes_from_document(doc: Mapping[str, Any]) -> list[SlurmNode]:
    """The nodes of a decoded reply: ``sinfo --json`` and slurmrestd's ``GET .../nodes`` alike."""
    found: dict[str, SlurmNode] = {}
    for node in _node_records(doc) + _group_records(doc):
        known = found.get(node.name)
        if known is not None:  # one node may appear in several partition groups
            parts = tuple(sorted(set(known.partitions) | set(node.partitions)))
            node = SlurmNode(
                node.name,
                parts,
                node.gpu_type,
                node.gpus_total,
                node.gpus_alloc,
                node.state,
                node.flags,
            )
        found[node.name] = node
    return [found[name] for name in sorted(found)]


def _node_records(doc: Mapping[str, Any]) -> list[SlurmNode]:
    out = []
    for rec in jsonshape.mappings(doc.get("nodes")):
        if not jsonshape.text(rec.get("name")):
            continue
        words = jsonshape.states(rec.get("state"))
        flags = words[1:] + jsonshape.states(rec.get("state_flags"))
        total = jsonshape.text(rec.get("gres"))
        out.append(
            SlurmNode(
                name=jsonshape.text(rec.get("name")),
                partitions=tuple(sorted(jsonshape.string_list(rec.get("partitions")))),
                gpu_type=gres.gpu_type(total),
                gpus_total=gres.gpu_count(total),
                gpus_alloc=gres.gpu_count(jsonshape.text(rec.get("gres_used"))),
                state=words[0] if words else "UNKNOWN",
                flags=tuple(flags),
            )
        )
    return out


def _group_records(doc: Mapping[str, Any]) -> list[SlurmNode]:
    """23.02+ ``sinfo --json``: groups of nodes sharing partition, state and GRES."""
    out = []
    for group in jsonshape.mappings(doc.get("sinfo")):
        names = _group_names(group.get("nodes"))
        gres_info = jsonshape.mapping(group.get("gres"))
        total = jsonshape.text(gres_info.get("total"))
        used = jsonshape.text(gres_info.get("used"))
        node_info = jsonshape.mapping(group.get("node"))
        words = jsonshape.states(node_info.get("state"))
        part = jsonshape.mapping(group.get("partition"))
        part_name = jsonshape.text(part.get("name"))
        for name in names:
            out.append(
                SlurmNode(
                    name=name,
                    partitions=(part_name,) if part_name else (),
                    gpu_type=gres.gpu_type(total),
                    gpus_total=gres.gpu_count(total),
                    gpus_alloc=gres.gpu_count(used),
                    state=words[0] if words else "UNKNOWN",
                    flags=tuple(words[1:]),
                )
            )
    return out


def _group_names(value: Any) -> tuple[str, ...]:
    if isinstance(value, Mapping):
        value = value.get("nodes")
    return jsonshape.string_list(value)
