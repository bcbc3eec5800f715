"""What a login node's install of hops weighs, against the install with every extra.

Builds the wheels of hops-scheduler and hops-probe from a copy of this checkout,
installs them into two fresh venvs at constraints/ci.txt's versions, the slim
core (``pip install hops-scheduler``) and the full one
(``hops-scheduler[all]``), and prints:

* ``slim_mb`` / ``full_mb``: the installed size of every distribution in the
  venv but pip and setuptools (the files each one's RECORD lists), in MiB;
  ``ratio`` is slim over full (goal: under a third);
* ``status_import_s``: the median time, over ``--runs`` fresh interpreters of
  the slim venv, to import what ``hops status`` imports before it reads the
  ledger (goal: under 0.15 s); ``status_s``: the median wall time of a whole
  ``hops status`` on an empty ledger (it also asks Slurm for the nodes: the
  test cluster when ``SLURM_CONF`` is set), ``python_s`` that of ``python -c pass``
  (the interpreter's own start, the floor of every command);
* ``largest``: the slim install's five largest distributions.

    .venv/bin/python benchmarks/install_footprint.py [--runs 7] [--json]

Needs the package index (or pip's cache) for the dependencies.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "packaging"))
sys.path.insert(0, str(REPO / "benchmarks"))

from cli_latency import STATUS_IMPORTS  # noqa: E402
from packaging_dists import SKIP, build, make_venv, pip_install, run  # noqa: E402

#: Installed with every venv, not by hops.
TOOLING = {"pip", "setuptools", "wheel"}
MIB = 1024 * 1024


def sizes(python: Path) -> dict[str, int]:
    """Bytes on disk of each installed distribution, from its RECORD."""
    code = (
        "import json, importlib.metadata as m, os\n"
        "out = {}\n"
        "for d in m.distributions():\n"
        "    total = 0\n"
        "    for f in d.files or ():\n"
        "        p = f.locate()\n"
        "        total += os.path.getsize(p) if os.path.isfile(p) else 0\n"
        "    out[d.metadata['Name'].lower()] = total\n"
        "print(json.dumps(out))\n"
    )
    found: dict[str, int] = json.loads(run([str(python), "-c", code], python.parent, err=False))
    return {name: size for name, size in found.items() if name not in TOOLING}


def median_s(argv: list[str], env: dict[str, str], runs: int, *, printed: bool = False) -> float:
    """Median over ``runs`` (after one warm-up) of the wall time, or of the time printed."""
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=120)
        took = float(out.stdout.strip()) if printed else time.perf_counter() - start
        if i:
            times.append(took)
    return statistics.median(times)


def status_times(python: Path, workdir: Path, runs: int) -> dict[str, float]:
    conf = workdir / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "sqlite:///{workdir / "ledger.sqlite"}"\n')
    dropped = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["HOPS_CONF"] = str(conf)  # Slurm: the test cluster's when SLURM_CONF names it
    run([str(python.parent / "hops"), "db", "upgrade"], workdir, env)
    timed_import = (
        f"import time; t = time.perf_counter(); {STATUS_IMPORTS}; print(time.perf_counter() - t)"
    )
    return {
        "status_import_s": median_s([str(python), "-c", timed_import], env, runs, printed=True),
        "status_s": median_s([str(python.parent / "hops"), "status"], env, runs),
        "python_s": median_s([str(python), "-c", "pass"], env, runs),
    }


def measure(runs: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="hops-footprint-") as tmp:
        root = Path(tmp)
        src = root / "src"
        shutil.copytree(REPO, src, ignore=SKIP)  # building writes into the source tree
        out = root / "dist"
        build(src, out)
        build(src / "probe", out)
        (wheel,) = out.glob("hops_scheduler-*.whl")
        # --pre: between tags both distributions carry a .devN version; every
        # other package is pinned by constraints/ci.txt
        slim = make_venv(root / "slim")
        pip_install(slim, "--pre", "--find-links", str(out), str(wheel))
        full = make_venv(root / "full")
        pip_install(full, "--pre", "--find-links", str(out), f"{wheel}[all]")
        slim_sizes, full_sizes = sizes(slim), sizes(full)
        figures: dict[str, object] = {
            "slim_mb": round(sum(slim_sizes.values()) / MIB, 1),
            "full_mb": round(sum(full_sizes.values()) / MIB, 1),
        }
        figures["ratio"] = round(sum(slim_sizes.values()) / sum(full_sizes.values()), 3)
        figures |= {k: round(v, 4) for k, v in status_times(slim, root, runs).items()}
        largest = sorted(slim_sizes.items(), key=lambda kv: -kv[1])[:5]
        figures["largest"] = {name: round(size / MIB, 1) for name, size in largest}
        figures["slim_distributions"] = len(slim_sizes)
        figures["full_distributions"] = len(full_sizes)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.runs)
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:20} {value}")


if __name__ == "__main__":
    main()
