"""Repeat a comparison over several seeds: mean and 95 % interval per metric, paired ratios.

One seed is one draw of the workload, of the cluster's hidden factors and of the
estimator's noise; a difference between policies that one seed shows may be
luck. Every (policy, seed) run is independent, so they are spread over worker
processes. For each policy and metric the mean over seeds and a Student-t 95 %
confidence interval are reported; for each baseline, the per-seed ratio
``reference / baseline`` of every metric (the same workload under both, so the
pairs share their luck) with its own mean and interval. A ratio below 1 on a
lower-is-better metric (JCT, wait, makespan) means the reference did better.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from hopsd.core.errors import InvalidInputError, missing_extra
from hopsd.core.typed_settings import settings_table
from hopsd.sim.engine_config import EngineConfig
from hopsd.sim.knobs import SimKnobs, effective
from hopsd.sim.metrics import job_records, summarise
from hopsd.sim.run import (
    check_request,
    load_inputs,
    policy_configs,
    policy_settings_of,
    run_policy,
)
from hopsd.sim.truth import GroundTruth
from hopsd.sim.workload import JobSpec

#: Metrics whose ratio is reported (others, e.g. preemptions, are often 0 for a baseline).
RATIO_METRICS = (
    "makespan_h",
    "avg_jct_h",
    "median_jct_h",
    "p99_jct_h",
    "avg_wait_h",
    "max_lr",
    "p99_lr",
    "max_ftf",
)


def parse_seeds(text: str) -> list[int]:
    """``"0-9"``, ``"0,3,5"`` or a mix (``"0-2,7"``) as a sorted list of distinct seeds."""
    seeds: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if dash else first
        except ValueError:
            raise InvalidInputError(f"seeds {text!r}: use N, N-M or a comma list") from None
        if first < 0 or last < first:
            raise InvalidInputError(f"seeds {text!r}: ranges run from a low to a high seed >= 0")
        seeds.update(range(first, last + 1))
    if not seeds:
        raise InvalidInputError(f"seeds {text!r}: no seed given")
    return sorted(seeds)


def student_t() -> Any:
    """SciPy's Student-t distribution, or the error naming the extra that installs it."""
    try:
        from scipy.stats import t
    except ImportError as exc:
        raise missing_extra("confidence intervals over seeds", "scipy", "sim") from exc
    return t


def interval(values: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """Mean and Student-t confidence interval of ``values`` (a point when n = 1)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return {"mean": mean, "ci_low": mean, "ci_high": mean, "n": n}
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = float(student_t().ppf(0.5 + level / 2, n - 1)) * math.sqrt(var / n)
    return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half, "n": n}


#: The run's inputs at a seed: :func:`load_inputs` with all but the seed given.
LoadInputs = Callable[[int], tuple[GroundTruth, list[JobSpec]]]


def _one_run(
    load: LoadInputs, seed: int, name: str, config: EngineConfig, own: object | None = None
) -> dict[str, float]:
    """Figures of one policy (with its own settings ``own``) on one seed (runs in a worker
    process)."""
    truth, jobs = load(seed)
    result = run_policy(truth, jobs, name, replace(config, seed=seed), own=own)
    figures = summarise(result, job_records(truth, result))
    figures["wall_s"] = result.wall_planning_s
    return figures


def aggregate(
    per_seed: Mapping[int, Mapping[str, Mapping[str, float]]], reference: str
) -> dict[str, Any]:
    """Mean and interval per policy and metric, and paired ratios to ``reference``."""
    seeds = sorted(per_seed)
    policies = list(per_seed[seeds[0]])
    metrics = [m for m in per_seed[seeds[0]][policies[0]] if m != "wall_s"]
    summary = {
        p: {m: interval([per_seed[s][p][m] for s in seeds]) for m in metrics} for p in policies
    }
    paired: dict[str, dict[str, dict[str, float]]] = {}
    for base in policies:
        if base == reference:
            continue
        paired[base] = {}
        for metric in RATIO_METRICS:
            ratios = [
                per_seed[s][reference][metric] / per_seed[s][base][metric]
                for s in seeds
                if per_seed[s][base].get(metric, 0.0) > 0 and metric in per_seed[s][reference]
            ]
            if ratios:
                paired[base][metric] = interval(ratios)
    return {"summary": summary, "paired_ratio": paired, "reference": reference}


def simulate_seeds(
    preset: str | None = "paper-64",
    *,
    seeds: Sequence[int],
    cluster: str | Path | None = None,
    trace: str | Path | None = None,
    profiles: str | Path | None = None,
    policies: Sequence[str] = ("hops", "sia", "gavel", "fifo"),
    engine: EngineConfig | None = None,
    knobs: SimKnobs | None = None,
    workers: int = 1,
    out_dir: str | Path | None = None,
    trace_format: str = "hops",
) -> dict[str, Any]:
    """Every policy on every seed; returns per-seed figures, summaries and paired ratios
    (:func:`seeds_object`)."""
    if not seeds:
        raise InvalidInputError("give at least one seed")
    own = policy_settings_of(policies, knobs)
    check_request(policies, None, own)  # --out here writes results.json only, no plots
    if len(seeds) > 1:
        student_t()  # the intervals' library, before any seed runs
    if workers < 1:
        raise InvalidInputError(f"workers must be >= 1, got {workers}")
    use_preset = preset if cluster is None or trace is None else None
    load: LoadInputs = partial(
        load_inputs, use_preset, cluster, trace, profiles, trace_format=trace_format
    )
    load(seeds[0])  # fail early
    configs = policy_configs(policies, engine or EngineConfig(), knobs)
    tasks = [(s, p) for s in seeds for p in policies]
    args = [(load, s, p, configs[p], own[p]) for s, p in tasks]
    if workers == 1:
        figures = [_one_run(*a) for a in args]
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
            figures = list(pool.map(_one_run, *zip(*args, strict=True)))
    per_seed: dict[int, dict[str, dict[str, float]]] = {}
    for (seed, name), fig in zip(tasks, figures, strict=True):
        per_seed.setdefault(seed, {})[name] = fig
    source = {
        "preset": preset,
        "cluster": str(cluster) if cluster is not None else None,
        "trace": str(trace) if trace is not None else None,
    }
    out = seeds_object(source, seeds, policies, configs, own, per_seed)
    if out_dir is not None:
        path = Path(out_dir)
        path.mkdir(parents=True, exist_ok=True)
        (path / "results.json").write_text(json.dumps(out, indent=2), encoding="utf-8")
    return out


def seeds_object(
    source: Mapping[str, Any],
    seeds: Sequence[int],
    policies: Sequence[str],
    configs: Mapping[str, EngineConfig],
    own: Mapping[str, object],
    per_seed: Mapping[int, Mapping[str, Mapping[str, float]]],
) -> dict[str, Any]:
    """The results object of a comparison over seeds, from each (seed, policy)'s figures.

    ``source`` names the workload (``preset``, ``cluster``, ``trace``). A sweep
    merging its cells builds the same object as a run over seeds in one process.
    The reference of the ratios is ``hops`` when it runs, else the first policy.
    """
    reference = "hops" if "hops" in policies else policies[0]
    return {
        **source,
        "seeds": list(seeds),
        "policies": list(policies),
        "knobs": {name: effective(configs[name]) for name in policies},
        "policy_settings": {name: settings_table(own[name]) for name in policies},
        "per_seed": {str(s): dict(per_seed[s]) for s in seeds},
        **aggregate(per_seed, reference),
    }
