"""``hops nodes``: nodes by GPU type, with per-server speed factors learned from history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from hops_cli.common import config_of, fail, print_json
from hops_cli.ledger_access import reading
from hops_cli.output_options import AsJson, NoHeader, Parsable, columns_option
from hops_cli.table import Layout, pick_columns, render
from hopsd.slurm.errors import SlurmError
from hopsd.slurm.port import SlurmNode

if TYPE_CHECKING:
    from hopsd.ledger.unit import Unit

COLUMNS = ("NODE", "TYPE", "PARTITIONS", "STATE", "GPUS", "ALLOC", "SPEED", "FROM_JOBS")
DEFAULT = tuple(c for c in COLUMNS if c != "PARTITIONS")


def speed_factors(unit: Unit, node_type: dict[str, str]) -> dict[str, tuple[float, int]]:
    """Per node: median over jobs of (its per-GPU throughput / the job's best server of the type).

    Only jobs measured on at least two servers of one GPU type at the same GPU
    count are compared, so a factor below 1 means this server ran the very same
    jobs slower than a sibling of its type (older CPU, slower disk...), and a
    node no job has been compared on shows no factor. The planner uses the same
    factors as a prior where a job has not run yet (:mod:`hopsd.core.nodespeed`).
    """
    from hopsd.daemon.node_speeds import ledger_factors

    return ledger_factors(unit, node_type)


def nodes_payload(
    nodes: list[SlurmNode], factors: dict[str, tuple[float, int]], overrides: dict[str, str]
) -> dict[str, Any]:
    """The ``--json`` document of ``hops nodes`` (stable schema, see README)."""
    out = []
    for node in sorted(nodes, key=lambda n: (overrides.get(n.name) or n.gpu_type or "", n.name)):
        factor = factors.get(node.name)
        out.append(
            {
                "node": node.name,
                "gpu_type": overrides.get(node.name) or node.gpu_type,
                "partitions": list(node.partitions),
                "state": node.state,
                "gpus_total": node.gpus_total,
                "gpus_alloc": node.gpus_alloc,
                "speed_factor": None if factor is None else round(factor[0], 3),
                "speed_samples": 0 if factor is None else factor[1],
            }
        )
    return {"nodes": out}


def _cells(row: dict[str, Any]) -> dict[str, str]:
    """One node of the payload as the table's cells, by column name."""
    return {
        "NODE": row["node"],
        "TYPE": row["gpu_type"] or "-",
        "PARTITIONS": ",".join(row["partitions"]) or "-",
        "STATE": row["state"],
        "GPUS": str(row["gpus_total"]),
        "ALLOC": str(row["gpus_alloc"]),
        "SPEED": "-" if row["speed_factor"] is None else f"{row['speed_factor']:.2f}",
        "FROM_JOBS": str(row["speed_samples"]),
    }


def nodes(
    ctx: typer.Context,
    fmt: Annotated[str | None, columns_option(COLUMNS)] = None,
    noheader: NoHeader = False,
    parsable: Parsable = False,
    as_json: AsJson = False,
) -> None:
    """List nodes by GPU type with their learned speed factor.

    The factor compares each server with the other servers of its GPU type on the
    same jobs (1.00 = typical; '-' = not enough history yet).
    """
    from hopsd.slurm.factory import port_from_config

    columns = pick_columns(COLUMNS, fmt, DEFAULT)
    config = config_of(ctx)
    try:
        listed = port_from_config(config).list_nodes()
    except (SlurmError, ValueError) as exc:
        fail(f"cannot list nodes: {exc}")
    overrides = dict(config.node_types)
    types = {n.name: overrides.get(n.name) or n.gpu_type or "" for n in listed}
    with reading(config) as unit:
        factors = speed_factors(unit, types)
    payload = nodes_payload(listed, factors, overrides)
    if as_json:
        print_json(payload)
        return
    rows = [[cells[c] for c in columns] for cells in map(_cells, payload["nodes"])]
    render("nodes", columns, rows, Layout(tuple(columns), not noheader, parsable))
