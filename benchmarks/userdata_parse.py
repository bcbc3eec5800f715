"""What the bounded parser of user data costs, against plain ``json.loads`` in the same run.

Every probe line and progress file hopsd reads goes through
:func:`hopsd.userdata.load_json` (size, depth, finite numbers, repeated keys,
value counts) and then a closed-key check. This prints microseconds per parse
of typical inputs and of the attacks it refuses, and the ratio to
``json.loads`` (the baseline, which has none of the checks and raises
``RecursionError`` on the nested attack).

    .venv/bin/python benchmarks/userdata_parse.py [--repeat 2000] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable

from hopsd.daemon.job_reports import parse_line, parse_progress
from hopsd.userdata import JSON_LIMITS, UserDataError, load_json

RUN = {
    "kind": "run", "iterations": 40, "samples": 1280, "seconds": 2.0, "busy_s": 1.9,
    "t_d": [0.0123] * 64, "t_w": [0.0011] * 64, "t_d_sum": 0.8, "t_w_sum": 0.07,
    "loader": False, "v": 1, "job": 101, "run": 0, "node": "a100n1", "seq": 9,
    "at": 1.7e9, "samples_done": 12800,
}  # fmt: skip
RUN_LINE = json.dumps(RUN, separators=(",", ":")).encode()
PROGRESS = json.dumps(
    {"samples_done": 640, "per_gpu": 100.0, "at": 1.7e9, "nodes": ["v100n1"], "gpus": 2}
).encode()
NESTED = b"[" * 10_000


def per_call_us(fn: Callable[[], object], repeat: int) -> float:
    """Median of five runs of ``repeat`` calls, in microseconds per call."""
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            with contextlib.suppress(UserDataError, RecursionError):
                fn()
        runs.append((time.perf_counter() - started) / repeat * 1e6)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cases = {
        "probe run line (64+64 times)": (
            lambda: json.loads(RUN_LINE),
            lambda: parse_line(RUN_LINE, 101),
        ),
        "progress file": (lambda: json.loads(PROGRESS), lambda: parse_progress(PROGRESS)),
        "nested attack, 10k brackets": (
            lambda: json.loads(NESTED),
            lambda: load_json(NESTED, JSON_LIMITS, "line"),
        ),
    }
    rows = []
    for name, (baseline, bounded) in cases.items():
        base = per_call_us(baseline, args.repeat)
        ours = per_call_us(bounded, args.repeat)
        row = {"input": name, "json_loads_us": base, "bounded_us": ours, "ratio": ours / base}
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'input':32} {'json.loads µs':>14} {'bounded µs':>11} {'ratio':>7}")
    for r in rows:
        print(
            f"{r['input']:32} {r['json_loads_us']:14.2f} {r['bounded_us']:11.2f} {r['ratio']:7.2f}"
        )


if __name__ == "__main__":
    main()
