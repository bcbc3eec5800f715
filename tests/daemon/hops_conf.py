"""hops.conf for the tests and benchmarks: the two clusters they run on, and changes to them.

The live test cluster (``docker/cluster.sh``: k80, v100 and a100 partitions)
and the in-memory one of :mod:`daemon_fakeport` each have one base
configuration here; a test or benchmark states only what it does differently
(:func:`merged`), so the clusters' partitions, speeds and quick rounds are
written once for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

#: hops.conf tables by name (``gpu_types.k80``), in file order; values are TOML's.
Tables = dict[str, dict[str, object]]
#: Changes to tables: a value (or a whole table) of None removes it.
Changes = Mapping[str, Mapping[str, object] | None]

#: The live test cluster with short rounds, so that live tests are quick.
LIVE: Tables = {
    "slurm": {"partitions": ["k80", "v100", "a100"], "timeout_s": 8.0},
    "scheduler": {
        "round_length_s": 8.0,
        "queue_refresh_s": 1.0,
        "restart_penalty_s": 2.0,
        "reference_throughput": 100.0,
        "solver_time_limit_s": 5.0,
        "max_demand_gpus": 16,
    },
    "gpu_types.k80": {"speed": 1.0},
    "gpu_types.v100": {"speed": 2.0},
    "gpu_types.a100": {"speed": 4.0},
    "metrics": {"address": ""},
}

#: The in-memory cluster of ``daemon_fakeport.small_cluster`` (slow k80s, fast a100s).
FAKE: Tables = {
    "slurm": {"partitions": ["slow", "fast"]},
    "scheduler": {"round_length_s": 10.0, "queue_refresh_s": 1.0, "restart_penalty_s": 1.0},
    "gpu_types.k80": {"speed": 1.0},
    "gpu_types.a100": {"speed": 4.0},
    "metrics": {"address": ""},
}


def merged(base: Tables, changes: Changes) -> Tables:
    """``base`` with ``changes`` applied; new tables go last (after ``[daemon]``, say)."""
    out = {name: dict(body) for name, body in base.items()}
    for name, body in changes.items():
        if body is None:
            out.pop(name, None)
            continue
        table = out.setdefault(name, {})
        for key, value in body.items():
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
    return out


def live(ledger_url: str, spool: Path | None, changes: Changes | None = None) -> Tables:
    """The live cluster's tables on a ledger and spool (``[ledger]`` first, ``[daemon]`` last)."""
    daemon: dict[str, object] = {} if spool is None else {"spool_dir": str(spool)}
    tables = {"ledger": {"url": ledger_url}, **LIVE, "daemon": daemon}
    return merged(tables, changes or {})


def value(item: object) -> str:
    """One TOML value: strings as basic strings, booleans lower-case, lists inline."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, str):
        return json.dumps(item)
    if isinstance(item, Sequence):
        return "[" + ", ".join(value(i) for i in item) + "]"
    return repr(item)


def render(tables: Tables, raw: Mapping[str, str] | None = None) -> str:
    """The file: each table's keys, then the ``raw`` TOML lines a caller wrote for it."""
    lines: list[str] = []
    for name, body in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {value(item)}" for key, item in body.items()]
        if raw and raw.get(name, "").strip():
            lines.append(raw[name].strip("\n"))
    return "\n".join(lines) + "\n"
