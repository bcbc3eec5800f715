"""Run a comparison: one workload, one cluster, several policies; figures, CSVs and plots.

:func:`simulate` is what ``hops simulate`` calls. A run is fully determined by its
inputs and ``seed`` (the cluster's hidden factors, the generated workload, the
profiling and measurement noise).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from hopsd.core.errors import InvalidInputError, missing_extra
from hopsd.core.model import Cluster
from hopsd.core.settings import Settings
from hopsd.core.typed_settings import SettingsError, settings_table
from hopsd.plugins import get_policy, policy_names, policy_spec
from hopsd.sim.cluster import SimCluster
from hopsd.sim.cluster_file import load_cluster
from hopsd.sim.engine import Engine
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.gavel_format import gavel_models, read_gavel_throughputs, read_gavel_trace
from hopsd.sim.knobs import KnobsError, SimKnobs, effective
from hopsd.sim.metrics import JobRecord, job_records, summarise, write_jobs_csv, write_jobs_json
from hopsd.sim.profiles import load_profiles, with_aliases
from hopsd.sim.sia_format import sia_inputs
from hopsd.sim.state import EngineResult
from hopsd.sim.trace import read_trace, write_trace
from hopsd.sim.truth import GroundTruth, ModelSpec
from hopsd.sim.workload import PRESETS, JobSpec, generate

DEFAULT_POLICIES = ("hops", "sia", "gavel", "fifo")

#: progress(policy, simulated seconds, jobs done, jobs total)
SimProgress = Callable[[str, float, int, int], None]


def preset_path(name: str) -> Path:
    """Path of a data file shipped in ``hopsd/sim/presets``."""
    return Path(str(resources.files("hopsd.sim").joinpath("presets", name)))


def preset_names() -> tuple[str, ...]:
    return tuple(sorted(PRESETS))


def build_truth(sim_cluster: SimCluster, profiles: str | Path | None = None) -> GroundTruth:
    models = load_profiles(profiles if profiles is not None else preset_path("models.toml"))
    models = with_aliases(models, sim_cluster.compute_as)
    return GroundTruth(sim_cluster.cluster, models, sim_cluster.data_factors)


#: Trace formats read: hops's CSV, Gavel's ``.trace`` with its throughputs JSON as profiles,
#: Sia's workload CSV with its traces directory (placement profiles) as profiles.
TRACE_FORMATS = ("hops", "gavel", "sia")


def load_inputs(
    preset: str | None,
    cluster: str | Path | None,
    trace: str | Path | None,
    profiles: str | Path | None,
    seed: int,
    trace_format: str = "hops",
) -> tuple[GroundTruth, list[JobSpec]]:
    """The ground truth and the job list of a run, from a preset and/or files.

    With ``trace_format="gavel"`` the trace is a Gavel ``.trace`` file and
    ``profiles`` its throughputs JSON (:mod:`hopsd.sim.gavel_format`); with
    ``trace_format="sia"`` a Sia workload CSV and Sia's traces directory
    (:mod:`hopsd.sim.sia_format`).
    """
    if trace_format not in TRACE_FORMATS:
        raise InvalidInputError(
            f"unknown trace format {trace_format!r}; known: {', '.join(TRACE_FORMATS)}"
        )
    if trace_format in _FOREIGN:
        return _load_foreign(trace_format, cluster, trace, profiles, seed)
    if preset is not None and preset not in PRESETS:
        raise InvalidInputError(f"unknown preset {preset!r}; known: {', '.join(preset_names())}")
    if cluster is None and preset is None:
        raise InvalidInputError("give a preset or a cluster file")
    if trace is None and preset is None:
        raise InvalidInputError("give a preset or a trace file to replay")
    cluster_path = Path(cluster) if cluster is not None else preset_path(f"{preset}.toml")
    truth = build_truth(load_cluster(cluster_path, seed=seed), profiles)
    if trace is not None:
        jobs = read_trace(trace, known_models=truth.models)
    else:
        assert preset is not None
        jobs = generate(PRESETS[preset], truth, seed)
    return truth, jobs


def _gavel_inputs(
    trace: str | Path, throughputs: str | Path, cluster: Cluster
) -> tuple[dict[str, ModelSpec], list[JobSpec]]:
    jobs = read_gavel_trace(trace)
    return gavel_models(read_gavel_throughputs(throughputs), {j.model for j in jobs}, cluster), jobs


_ReadForeign = Callable[
    [str | Path, str | Path, Cluster], tuple[dict[str, ModelSpec], list[JobSpec]]
]

#: What a foreign trace format needs besides a cluster (said when a file is missing),
#: and how its trace and profiles become models and jobs on that cluster.
_FOREIGN: dict[str, tuple[str, _ReadForeign]] = {
    "gavel": (
        "a Gavel trace needs --cluster, --trace (.trace) and --profiles (throughputs JSON)",
        _gavel_inputs,
    ),
    "sia": (
        "a Sia workload needs --cluster, --trace (workload CSV) and --profiles "
        "(Sia's traces directory)",
        sia_inputs,
    ),
}


def _load_foreign(
    trace_format: str,
    cluster: str | Path | None,
    trace: str | Path | None,
    profiles: str | Path | None,
    seed: int,
) -> tuple[GroundTruth, list[JobSpec]]:
    needs, read = _FOREIGN[trace_format]
    if cluster is None or trace is None or profiles is None:
        raise InvalidInputError(needs)
    sim_cluster = load_cluster(Path(cluster), seed=seed)
    models, jobs = read(trace, profiles, sim_cluster.cluster)
    return GroundTruth(sim_cluster.cluster, models, sim_cluster.data_factors), jobs


def run_policy(
    truth: GroundTruth,
    jobs: Sequence[JobSpec],
    name: str,
    config: EngineConfig,
    progress: SimProgress | None = None,
    own: object | None = None,
) -> EngineResult:
    """Replay ``jobs`` under one policy, with its own settings ``own`` (None: its defaults)."""
    callback = None
    if progress is not None:

        def callback(now: float, done: int, total: int) -> None:
            progress(name, now, done, total)

    started = time.perf_counter()
    result = Engine(truth, jobs, get_policy(name, own), config, callback).run()
    result.wall_planning_s = time.perf_counter() - started
    return result


def simulate(
    preset: str | None = "paper-64",
    *,
    cluster: str | Path | None = None,
    trace: str | Path | None = None,
    profiles: str | Path | None = None,
    policies: Sequence[str] = DEFAULT_POLICIES,
    seed: int = 0,
    out_dir: str | Path | None = None,
    progress_callback: SimProgress | None = None,
    settings: Settings | None = None,
    engine: EngineConfig | None = None,
    workers: int = 1,
    knobs: SimKnobs | None = None,
    trace_format: str = "hops",
) -> dict[str, Any]:
    """Compare ``policies`` on one workload; returns the results object.

    ``{"policies": {name: {"makespan_h", "avg_jct_h", "median_jct_h", "p99_jct_h",
    "avg_wait_h", "max_lr", "p99_lr", "max_ftf", "avg_idle_gpus", "avg_usable_idle_gpus",
    "utilization", "preemptions"}}, "seed", "preset", "n_jobs", "total_gpus", "wall_s"}``.
    With ``out_dir``: ``results.json``, ``jobs_<policy>.csv`` and ``.json``, ``trace.csv`` (the
    workload replayed) and PNG plots are written there.

    ``workers > 1`` replays the policies in that many separate processes at once:
    the runs share nothing, so the figures are the same as one after the other,
    and a comparison finishes in about the time of its slowest policy. Progress
    is then reported once per policy, when its run ends.

    ``knobs`` sets round length, restart penalty and profiling time, for every
    policy or per policy (:mod:`hopsd.sim.knobs`), and each policy's own
    settings; what each policy ran with is recorded under ``"knobs"`` and
    ``"policy_settings"``.
    """
    own = policy_settings_of(policies, knobs)
    check_request(policies, out_dir, own)
    truth, jobs = load_inputs(
        preset if cluster is None or trace is None else None,
        cluster,
        trace,
        profiles,
        seed,
        trace_format,
    )
    base = engine or EngineConfig()
    config = replace(base, seed=seed, settings=settings or base.settings)
    configs = policy_configs(policies, config, knobs)
    figures: dict[str, dict[str, float]] = {}
    records: dict[str, list[JobRecord]] = {}
    results: dict[str, EngineResult] = {}
    wall: dict[str, float] = {}
    runs = _replay(truth, jobs, policies, configs, own, progress_callback, workers)
    for name, result in runs:
        results[name] = result
        records[name] = job_records(truth, result)
        figures[name] = summarise(result, records[name])
        wall[name] = result.wall_planning_s
    out: dict[str, Any] = {
        "policies": figures,
        "seed": seed,
        "preset": preset,
        "cluster": str(cluster) if cluster is not None else None,
        "trace": str(trace) if trace is not None else None,
        "trace_format": trace_format,
        "n_jobs": len(jobs),
        "total_gpus": truth.cluster.total_gpus,
        "round_length_s": config.settings.round_length_s,
        "restart_penalty_s": config.settings.restart_penalty_s,
        "knobs": {name: effective(configs[name]) for name in policies},
        "policy_settings": {name: settings_table(own[name]) for name in policies},
        "wall_s": wall,
    }
    if out_dir is not None:
        _write_outputs(Path(out_dir), out, jobs, records, results)
    return out


def policy_configs(
    policies: Sequence[str], config: EngineConfig, knobs: SimKnobs | None
) -> dict[str, EngineConfig]:
    """Each policy's engine configuration: ``config`` with the policy's knobs put in."""
    if knobs is None:
        return {name: config for name in policies}
    known = policy_names()
    unknown = [n for n in knobs.per_policy if n not in known]
    if unknown:
        raise InvalidInputError(
            f"knobs for unknown policy {unknown[0]!r}; known: {', '.join(known)}"
        )
    return {name: knobs.config_for(name, config) for name in policies}


def policy_settings_of(policies: Sequence[str], knobs: SimKnobs | None) -> dict[str, object]:
    """Each policy's own settings, from the simulation file's ``[policies.NAME]`` tables.

    Every table is checked, also those of policies this run leaves out, so a file
    shared between runs fails on its first use, naming the key.
    """
    tables = knobs.settings if knobs is not None else {}
    where = knobs.where if knobs is not None else "simulation file"
    own: dict[str, object] = {}
    known = policy_names()
    for name in dict.fromkeys([*policies, *tables]):
        if name not in known:
            continue  # refused by name where it is used (check_request, policy_configs)
        try:
            own[name] = policy_spec(name).settings(tables.get(name))
        except SettingsError as exc:
            key = f"policies.{name}.{exc.key}" if exc.key else f"policies.{name}"
            raise KnobsError(f"{where}: {key}: {exc}") from exc
    return own


def _replay(
    truth: GroundTruth,
    jobs: Sequence[JobSpec],
    policies: Sequence[str],
    configs: dict[str, EngineConfig],
    own: dict[str, object],
    progress: SimProgress | None,
    workers: int,
) -> list[tuple[str, EngineResult]]:
    """Each policy's run, in the order asked, sequentially or over ``workers`` processes."""
    if workers < 1:
        raise InvalidInputError(f"workers must be >= 1, got {workers}")
    if workers == 1 or len(policies) == 1:
        return [
            (name, run_policy(truth, jobs, name, configs[name], progress, own[name]))
            for name in policies
        ]
    with ProcessPoolExecutor(max_workers=min(workers, len(policies))) as pool:
        futures = [
            pool.submit(run_policy, truth, jobs, name, configs[name], None, own[name])
            for name in policies
        ]
        out = []
        for name, future in zip(policies, futures, strict=True):
            result = future.result()
            if progress is not None:
                end = max((j.finish_time or 0.0) for j in result.jobs)
                progress(name, end, len(jobs), len(jobs))
            out.append((name, result))
        return out


def check_request(
    policies: Sequence[str],
    out_dir: str | Path | None,
    own: Mapping[str, object] | None = None,
) -> None:
    """Refuse, before any work, policies hops does not know or cannot build (with their
    own settings ``own``, else their defaults), and ``--out`` without the library that
    draws its plots."""
    unknown = [p for p in policies if p not in policy_names()]
    if unknown:
        raise InvalidInputError(
            f"unknown policy {unknown[0]!r}; known: {', '.join(policy_names())}"
        )
    if not policies:
        raise InvalidInputError("give at least one policy")
    for name in policies:
        get_policy(name, (own or {}).get(name))  # a baseline whose extra is missing fails here
    if out_dir is not None:
        require_plots()


def require_plots() -> None:
    """Fail before any work when ``--out``'s PNG plots cannot be drawn (the ``sim`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise missing_extra("the PNG plots written with --out", "matplotlib", "sim") from exc


def _what(summary: dict[str, Any]) -> str:
    """What a plot shows, for its title: the preset (or trace) and the seed."""
    source = summary.get("preset") or "trace"
    seed = summary.get("seed")
    return f"{source}, seed {seed}" if seed is not None else str(source)


def _write_outputs(
    out: Path,
    summary: dict[str, Any],
    jobs: Sequence[JobSpec],
    records: dict[str, list[JobRecord]],
    results: dict[str, EngineResult],
) -> None:
    from hopsd.sim.plots import write_plots  # matplotlib: loaded only to draw

    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    write_trace(out / "trace.csv", jobs)
    for name, recs in records.items():
        write_jobs_csv(out / f"jobs_{name}.csv", recs)
        write_jobs_json(out / f"jobs_{name}.json", recs)
    write_plots(out, records, {n: r.rounds for n, r in results.items()}, what=_what(summary))
