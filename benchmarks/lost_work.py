"""Work lost to hops's moves, preemptions and profiling, on the live Slurm test cluster.

A real hopsd (profiling on, 8 s rounds, a 4 s checkpoint grace) runs a mixed
workload (``tests/daemon/mixed_workload.py``): jobs with the probe that
checkpoint on notice, plain ``sleep`` jobs without it, one ``--no-preempt`` job
and one ``--exclude-types k80`` job; the a100 nodes are busy with a non-hops job
for the first 25 s, so the plan has moves to make when they free up. From the
probe's reports and the jobs' own start notes it counts what restarts cost:

    eval "$(bash docker/cluster.sh up | grep ^export)"
    .venv/bin/python benchmarks/lost_work.py [--json] [--keep DIR]

prints ``{"jobs", "restarts", "lost_samples", "lost_fraction",
"max_starts_uninstrumented", ...}``: lost samples are those a job had reported
done before a stop and that its next run did not resume from, as a share of
the instrumented jobs' samples. Goal: ``lost_fraction`` <= 0.01 and
``max_starts_uninstrumented`` <= 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "daemon"))

from mixed_workload import live_env, run_workload


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--keep", default="", help="copy the run's files (logs, spool) here")
    args = parser.parse_args(argv)
    if not os.environ.get("SLURM_CONF"):
        print("lost_work: SLURM_CONF is unset; start the test cluster first", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="hops-lostwork-"))
    env = live_env(root)
    try:
        result = run_workload(env)
    finally:
        env.cleanup()
        if args.keep:
            shutil.copytree(root, args.keep, dirs_exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)
    figures = result.figures()
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    else:
        for key, value in figures.items():
            print(f"{key:>32}: {value}")
    unfinished = [j.spec.label for j in result.jobs if j.state != "done"]
    if unfinished:
        print(f"lost_work: jobs not done: {unfinished}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
