"""``hops replay``: the ledger's window, replayed under each policy beside what really happened."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from hops_cli.common import EXIT_USAGE, config_of, console, fail, print_json
from hops_cli.ledger_access import reading
from hops_cli.simulate import stdout_to_stderr
from hops_cli.timespec import parse_time
from hopsd.config import HopsConfig

if TYPE_CHECKING:
    from hopsd.sim.engine_config import EngineConfig

COLUMNS = (
    ("avg_jct_s", "avg JCT s", "{:.1f}"),
    ("median_jct_s", "med JCT s", "{:.1f}"),
    ("p99_jct_s", "p99 JCT s", "{:.1f}"),
    ("avg_wait_s", "avg wait s", "{:.1f}"),
    ("max_lr", "max LR", "{:.2f}"),
    ("restarts", "restarts", "{:.0f}"),
)


def window_of(
    since: str | None, start: str | None, end: str | None, now: float
) -> tuple[float, float]:
    """The window asked: ``--since D`` (up to now) or ``--from T [--to T]``.

    ``-S/--starttime`` and ``-E/--endtime`` (sacct's names) are ``--from`` and
    ``--to``: the same parameters, so they combine and conflict alike.
    """
    if since is not None and (start is not None or end is not None):
        raise ValueError("give either --since or --from/--to (-S/-E), not both")
    if start is None and end is not None:
        raise ValueError("-E/--to needs -S/--from")
    if start is not None:
        lo = parse_time(start, now, "-S/--from")
        hi = parse_time(end, now, "-E/--to") if end is not None else now
    else:
        hi = now
        lo = parse_time(since or "24h", now, "--since")
    if hi <= lo:
        raise ValueError("the window is empty: --to must be after --from")
    return lo, hi


def slurm_inventory(config: HopsConfig) -> dict[str, tuple[str, int]]:
    """Nodes of the managed partitions as Slurm lists them now: node -> (GPU type, GPUs).

    Empty when Slurm cannot be asked; the replay then knows the nodes from the ledger.
    """
    from hopsd.slurm.errors import SlurmError
    from hopsd.slurm.factory import port_from_config

    try:
        listed = port_from_config(config).list_nodes()
    except (SlurmError, ValueError, OSError):
        return {}
    managed = set(config.partitions)
    out: dict[str, tuple[str, int]] = {}
    for node in listed:
        kind = config.node_types.get(node.name) or node.gpu_type or ""
        if managed and not managed.intersection(node.partitions):
            continue
        if kind and node.gpus_total > 0:
            out[node.name] = (kind, node.gpus_total)
    return out


def excluded_types(jobs: Sequence[Any], managed: Sequence[str]) -> dict[str, frozenset[str]]:
    """Per job, the GPU types its adopted tag kept it off (what the live planner obeyed)."""
    from hopsd.core.admission import type_limits
    from hopsd.slurm.tag import try_decode

    out: dict[str, frozenset[str]] = {}
    for job in jobs:
        tag = try_decode(job.adopted_tag)[0] if job.adopted_tag else None
        if tag is not None and (tag.types or tag.exclude_types):
            limits = type_limits(tag.types, tag.exclude_types, managed)
            out[job.job_id] = frozenset(t for t, _ in limits)
    return out


#: Slurm records submit times in whole seconds: a job came, on average, half a second
#: after the time the ledger has for it (and hopsd adopted it half a refresh after that).
SUBMIT_ROUNDING_S = 0.5


def _engine_config(config: HopsConfig, profiled: bool, profiled_s: float | None) -> EngineConfig:
    """The replay's engine, as hopsd ran the window: a job is adopted within a queue
    refresh (half of one on average) of its real submission (half a second, on average,
    after Slurm's whole-second submit time) and, where hopsd profiled, profiled first (runs on
    one GPU of each type, as long in all as the job's own runs really took, else as the
    window's median phase, else the timeout, their bound); moves and preemptions come
    under hopsd's notice (the job runs on for the grace, in flight, its GPUs and target
    reserved meanwhile)."""
    from hopsd.sim.replay import replay_engine_config

    profile_s = 0.0
    if config.profiling and profiled:
        profile_s = profiled_s if profiled_s is not None else config.profiling_timeout_s
    return replay_engine_config(
        config.settings(),
        spare_guard_s=config.spare_guard_s,
        adoption_s=config.queue_refresh_s / 2 + SUBMIT_ROUNDING_S,
        measure_after_s=config.queue_refresh_s,
        profile_s=profile_s,
        notice_grace_s=config.checkpoint_grace_s,
    )


def replay_payload(
    config: HopsConfig,
    lo: float,
    hi: float,
    policies: list[str],
    out: str | None = None,
    inventory_of: Callable[[HopsConfig], dict[str, tuple[str, int]]] | None = None,
) -> dict[str, Any]:
    """Read the window from the ledger and replay it (what ``--json`` prints).

    ``inventory_of`` lists the managed nodes (:func:`slurm_inventory`); it is asked
    only once the ledger holds jobs in the window.
    """
    from hopsd.config import policy_settings
    from hopsd.plugins import is_policy
    from hopsd.sim.replay import build_world, replay, round_times_s
    from hopsd.sim.replay_costs import measured_launch, measured_restart_cost

    # each policy as hops.conf sets it up ([policies.NAME]), refused before any reading
    own = {name: policy_settings(config, name) for name in policies if is_policy(name)}

    with reading(config) as unit:
        history = unit.history(lo, hi)
        # which of the window's jobs hopsd profiled, and how long that really took
        window_ids = [j.job_id for j in history.jobs]
        profiled_s = unit.profiling_phase_s(window_ids)
        profile_phases = unit.profiling_phases_s(window_ids)
        profiled = unit.profiled_jobs(window_ids)
        round_times = unit.full_round_times(lo, hi)
    if not history.jobs:
        raise ValueError(
            f"no job was submitted between {_stamp(lo)} and {_stamp(hi)} (try a wider --since)"
        )
    inventory = inventory_of(config) if inventory_of is not None else {}
    types = {name: config.gpu_type(name) for name in config.gpu_types}
    for seen in history.nodes:
        types.setdefault(seen.gpu_type, config.gpu_type(seen.gpu_type))

    def world_of(restart_cost_s: float | None) -> Any:
        return build_world(
            history.jobs,
            history.rates,
            history.nodes,
            types=types,
            reference_throughput=config.reference_throughput,
            node_types=config.node_types,
            inventory=inventory,
            profiled=config.profiling,
            restart_cost_s=restart_cost_s,
            launch_s=launch,
            grace_s=config.checkpoint_grace_s,
            profiled_jobs=profiled,
            excluded_types=excluded_types(history.jobs, sorted(types)),
            profile_phases_s=profile_phases,
        )

    # What a job's first launch cost (Slurm's start, its startup) is charged to its first start.
    launch = measured_launch(history.jobs, history.placements, config.queue_refresh_s)
    # What a relaunch really cost (measured on the window's restarted jobs) is charged
    # to every replayed move; the planner still prices moves at restart_penalty_s.
    restart_cost = measured_restart_cost(world_of(None), history.placements)
    world = world_of(restart_cost)
    engine = _engine_config(config, bool(profiled), profiled_s)
    rounds = round_times_s(round_times, world.origin)
    first = rounds[0] if rounds else 0.0
    engine = dataclasses.replace(engine, first_round_s=first, round_times=rounds)
    results = replay(world, policies, engine, out, own)
    results["window"] = {"from": lo, "to": hi}
    results["live_policy"] = config.policy
    results["nodes_from"] = "slurm" if inventory else "ledger"
    results["restart_cost_s"] = restart_cost
    results["first_round_s"] = first
    return results


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _table(results: dict[str, Any]) -> Table:
    window = results["window"]
    table = Table(
        title=(
            f"{results['n_jobs']} finished jobs submitted {_stamp(window['from'])} .. "
            f"{_stamp(window['to'])}, {results['total_gpus']} GPUs"
        ),
        title_justify="left",
    )
    table.add_column("run")
    for _, header, _ in COLUMNS:
        table.add_column(header, justify="right")
    rows = [(f"live ({results['live_policy']})", results["live"])]
    rows += [(f"replay {name}", figures) for name, figures in results["policies"].items()]
    for label, figures in rows:
        table.add_row(label, *(fmt.format(figures[key]) for key, _, fmt in COLUMNS))
    return table


def replay(
    ctx: typer.Context,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Window from then up to now: 30m, 24h, 7d, now-1day, sacct's times (default 24h).",
        ),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            "--from",
            "--starttime",
            "-S",
            help="Window start: sacct's times (2026-12-01T10:00, now-2days), epoch seconds.",
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option(
            "--to",
            "--endtime",
            "-E",
            help="Window end (default now): the same times as --from.",
        ),
    ] = None,
    policies: Annotated[
        str, typer.Option("--policies", help="Comma-separated: hops,sia,gavel,fifo,hops-ftf,...")
    ] = "hops,sia,gavel,fifo",
    out: Annotated[
        str | None, typer.Option("--out", help="Directory for results.json, CSVs and PNG plots.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results object.")] = False,
) -> None:
    """Replay the jobs hops ran in a window under each policy, beside what really happened.

    The trace (arrivals, demand sets, sizes), each job's learned throughput per GPU
    type and server, and the managed nodes come from the ledger; the replay takes
    hopsd's own scheduling step with hops.conf's round length and restart penalty.

    Example: hops replay --since 24h --policies hops,sia,gavel,fifo --out replay/
    """
    from hopsd.core.errors import HopsError
    from hopsd.solver_banner import silence_solver_banner

    silence_solver_banner()
    config = config_of(ctx)
    names = [p.strip() for p in policies.split(",") if p.strip()]
    try:
        lo, hi = window_of(since, start, end, time.time())
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    try:
        with stdout_to_stderr():
            results = replay_payload(config, lo, hi, names, out, slurm_inventory)
    except (HopsError, ValueError) as exc:
        fail(str(exc), EXIT_USAGE)
    except OSError as exc:
        fail(f"{exc.filename or 'output'}: {exc.strerror or exc}")
    if as_json:
        print_json(results)
        return
    console().print(_table(results))
    if results.get("restart_cost_s") is not None:
        console().print(
            f"a restart cost {results['restart_cost_s']:.1f} s on the cluster (measured), "
            f"charged to every replayed move; moves priced at {results['restart_penalty_s']:g} s"
        )
    if results.get("load_only"):
        load = ", ".join(f"{n} {state}" for state, n in sorted(results["load_only"].items()))
        console().print(f"replayed as load, not compared (unfinished or ended early): {load}")
    if results["skipped"]:
        skipped = ", ".join(f"{n} {state}" for state, n in sorted(results["skipped"].items()))
        console().print(f"not replayed (never progressed or too large): {skipped}")
    if out:
        console().print(f"results.json, per-job CSVs and plots written to {out}")
