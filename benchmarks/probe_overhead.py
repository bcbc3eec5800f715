"""Per-iteration cost of the hops probe, against the same loop without it.

The loop body is nearly empty, so what is measured is the probe's own cost
(context managers, clock reads, bookkeeping, and the amortised JSON-lines
flush, here every 0.2 s, far more often than the default 5 s). The goal is
< 1 % of a 10 ms iteration, i.e. < 100 us per iteration, in running mode.

With ``--real`` it times the real loop instead: the example CNN of
``examples/pytorch/train.py`` (one process, CPU), its steps with the probe
reporting (running mode) against the same steps with the probe off, and the
throughput hopsd would read from the probe's records against the loop's own
clock (goal: within 10 %).

    .venv/bin/python benchmarks/probe_overhead.py [--iterations N] [--json]
    .venv/bin/python benchmarks/probe_overhead.py --real [--steps N] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hops_probe import Probe

PHASES = ("data", "forward", "backward", "sync", "update")
ITERATION_S = 0.010


def body() -> int:
    return 1


def bare_loop(n: int) -> float:
    started = time.perf_counter()
    acc = 0
    for _ in range(n):
        for _phase in PHASES:
            acc += body()
    return (time.perf_counter() - started) / n


def probed_loop(n: int, probe: Probe) -> float:
    started = time.perf_counter()
    acc = 0
    done = 0
    for _ in range(n):
        with probe.iteration(samples=32) as it:
            for phase in PHASES:
                with it.phase(phase):
                    acc += body()
        done += 32
        probe.progress(done)
    probe.close()
    return (time.perf_counter() - started) / n


def make_probe(spool: str, mode: str, n: int) -> Probe:
    env = {
        "SLURM_JOB_ID": "bench",
        "HOPS_SPOOL_DIR": spool,
        "HOPS_PROBE_MODE": mode,
        "HOPS_PROBE_ITERATIONS": str(n),
        "HOPS_PROBE_FLUSH_S": "0.2",
    }
    return Probe(environ=env)


def measure(n: int, repeats: int) -> dict[str, float]:
    bare = min(bare_loop(n) for _ in range(repeats))
    with tempfile.TemporaryDirectory() as spool:
        run = min(probed_loop(n, make_probe(spool, "run", n)) for _ in range(repeats))
        profile = min(probed_loop(n, make_probe(spool, "profile", n)) for _ in range(repeats))
    overhead = max(run - bare, 0.0)
    return {
        "iterations": n,
        "bare_us": bare * 1e6,
        "run_mode_us": run * 1e6,
        "profile_mode_us": profile * 1e6,
        "overhead_us": overhead * 1e6,
        "profile_overhead_us": max(profile - bare, 0.0) * 1e6,
        "overhead_ratio_vs_10ms": overhead / ITERATION_S,
        "goal_met": overhead < 0.01 * ITERATION_S,
    }


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pytorch"


def real_loop(steps: int, mode: str, spool: str) -> tuple[float, float | None]:
    """(seconds per step, samples/s from the probe's run records) of the example's loop."""
    Path(spool).mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(EXAMPLE))
    import train  # the example job itself, imported as a module

    from hops_probe import Probe as JobProbe
    from hops_probe import pytorch as hops

    env = {"SLURM_JOB_ID": f"real-{mode}", "HOPS_SPOOL_DIR": spool,
           "HOPS_PROBE_MODE": mode, "HOPS_PROBE_FLUSH_S": "0.5"}  # fmt: skip
    train.PROBE = probe = JobProbe(environ=env)
    argv = ["--samples", "1e9", "--checkpoint", f"{spool}/{mode}.pt"]
    args = train.arguments(argv)
    trainer = train.build(args, hops.World(0, 1, 0, 1), 1, args.lr)
    for _ in range(20):  # warm-up: allocator, first-call costs
        trainer.step()
    started = time.perf_counter()
    for _ in range(steps):
        trainer.step()
        probe.progress(trainer.state.position)
    elapsed = time.perf_counter() - started
    probe.close()
    return elapsed / steps, probe_rate(Path(spool) / f"real-{mode}.jsonl")


def probe_rate(path: Path) -> float | None:
    """Samples/s as hopsd reads them: summed samples over summed seconds of run records."""
    if not path.exists():
        return None
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    runs = [r for r in records if r.get("kind") == "run" and r.get("seconds", 0) > 0]
    seconds = sum(r["seconds"] for r in runs)
    return sum(r["samples"] for r in runs) / seconds if seconds > 0 else None


def measure_real(steps: int, repeats: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)  # one core: the comparison is not at the mercy of the scheduler
    off: list[float] = []
    run: list[tuple[float, float | None]] = []
    with tempfile.TemporaryDirectory() as spool:
        for index in range(repeats):  # interleaved, so drift hits both alike
            off.append(real_loop(steps, "off", f"{spool}/{index}-off-dir")[0])
            run.append(real_loop(steps, "run", f"{spool}/{index}-run-dir"))
    bare, (probed, rate) = min(off), min(run)
    loop_rate = 32 / probed
    return {
        "steps": steps,
        "bare_step_ms": bare * 1e3,
        "probed_step_ms": probed * 1e3,
        "overhead_us": (probed - bare) * 1e6,
        "overhead_ratio": (probed - bare) / bare,
        "loop_samples_per_s": loop_rate,
        "probe_samples_per_s": rate,
        "probe_vs_loop": (rate / loop_rate) if rate else None,
        "goal_met": rate is not None and abs(rate / loop_rate - 1) <= 0.10,
    }


def print_real(figures: dict[str, Any]) -> None:
    print(f"example CNN, steps        {figures['steps']}")
    print(f"probe off                 {figures['bare_step_ms']:8.3f} ms/step")
    print(f"probe reporting           {figures['probed_step_ms']:8.3f} ms/step")
    print(f"overhead                  {figures['overhead_us']:8.1f} us/step "
          f"({100 * figures['overhead_ratio']:.2f} %)")  # fmt: skip
    print(f"loop's own throughput     {figures['loop_samples_per_s']:8.1f} samples/s")
    print(f"probe's throughput        {figures['probe_samples_per_s'] or 0:8.1f} samples/s "
          f"(ratio {figures['probe_vs_loop'] or 0:.3f}; goal within 10 %: "
          f"{figures['goal_met']})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--real", action="store_true", help="time the example CNN's loop")
    parser.add_argument("--steps", type=int, default=400, help="steps per real loop")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.real:
        real = measure_real(args.steps, args.repeats)
        print(json.dumps(real, indent=2)) if args.json else print_real(real)
        return
    figures = measure(args.iterations, args.repeats)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"iterations per loop      {figures['iterations']}")
    print(f"bare loop                {figures['bare_us']:8.2f} us/iteration")
    print(f"probe, running mode      {figures['run_mode_us']:8.2f} us/iteration")
    print(f"probe, profiling mode    {figures['profile_mode_us']:8.2f} us/iteration")
    print(f"running-mode overhead    {figures['overhead_us']:8.2f} us/iteration")
    ratio = figures["overhead_ratio_vs_10ms"]
    print(f"vs a 10 ms iteration     {100 * ratio:8.4f} %  (goal < 1 %: {figures['goal_met']})")


if __name__ == "__main__":
    main()
