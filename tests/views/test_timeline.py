"""The status page's timeline: each run a bar on its node's GPU lanes, at its times.

Pure: runs as the ledger records them go in, the document and its SVG come out;
every bar must stand where its run was (node, lanes, start, end), a notice
splits a run into its running part and its grace, and the curves count GPUs.
"""

from __future__ import annotations

import re

import pytest

from hopsd.ledger.records import JobRun
from hopsd.views.page import render
from hopsd.views.timeline import LABEL, WIDTH, bars_of, render_svg, timeline_payload

NODES = [("a100n1", "a100", 4), ("k80n1", "k80", 4)]


def run(
    n: int, start: float, end: float | None, parts: dict[str, int], kind: str = "run"
) -> JobRun:
    gpu_type = "a100" if next(iter(parts)).startswith("a100") else "k80"
    ended = "" if end is None else "moved"
    return JobRun(n, kind, gpu_type, tuple(parts.items()), start, end, ended, None)


def test_runs_at_once_on_one_node_take_different_lanes_and_later_runs_reuse_them() -> None:
    runs = {
        7: [run(0, 100.0, 160.0, {"a100n1": 2})],
        8: [run(0, 110.0, 150.0, {"a100n1": 2})],
        9: [run(0, 170.0, None, {"a100n1": 4})],
    }
    bars = bars_of(runs, {}, {n: g for n, _, g in NODES}, since=0.0, now=200.0)
    by_job = {b.job_id: b for b in bars}
    assert (by_job[7].lane, by_job[8].lane, by_job[9].lane) == (0, 2, 0)
    assert by_job[9].open and by_job[9].end == 200.0  # still running: drawn to now


def test_a_notice_splits_a_run_into_running_and_its_grace() -> None:
    runs = {7: [run(0, 100.0, 160.0, {"a100n1": 1}), run(1, 170.0, 190.0, {"k80n1": 1})]}
    bars = bars_of(runs, {(7, 0): 150.0}, {"a100n1": 4, "k80n1": 4}, 0.0, 200.0)
    assert [(b.run, b.kind, b.start, b.end) for b in bars] == [
        (0, "run", 100.0, 150.0),
        (0, "grace", 150.0, 160.0),
        (1, "run", 170.0, 190.0),
    ]


def test_gpus_are_held_from_the_release_to_the_start_and_the_lane_stays_reserved() -> None:
    """A run released at 90 and started by Slurm at 100 holds its GPUs from 90: a run
    that started at 95 elsewhere on the node takes other lanes. A release long before
    the start (a stale intent) or after it draws no held stretch."""
    runs = {
        7: [run(0, 100.0, 160.0, {"a100n1": 2}), run(1, 170.0, 180.0, {"k80n1": 1})],
        8: [run(0, 95.0, 150.0, {"a100n1": 2})],
        9: [run(0, 120.0, 130.0, {"k80n1": 1})],
    }
    releases = {(7, 0): 90.0, (7, 1): 175.0, (9, 0): 120.0 - 5000.0}
    bars = bars_of(runs, {}, {"a100n1": 4, "k80n1": 4}, 0.0, 200.0, releases)
    got = [(b.job_id, b.run, b.kind, b.start, b.end, b.lane) for b in bars]
    assert (7, 0, "held", 90.0, 100.0, 0) in got and (7, 0, "run", 100.0, 160.0, 0) in got
    assert (8, 0, "run", 95.0, 150.0, 2) in got  # job 7 held lanes 0-1 since 90
    assert not any(b.kind == "held" and (b.job_id, b.run) in ((7, 1), (9, 0)) for b in bars)
    doc = timeline_payload(runs, {}, NODES, [], 0.0, 200.0, releases)
    assert "class='bar held'" in render_svg(doc)


def test_each_bar_in_the_svg_is_where_its_run_was_and_curves_count_gpus() -> None:
    runs = {
        7: [run(0, 100.0, 150.0, {"a100n1": 2}, kind="profiling")],
        8: [run(0, 150.0, None, {"a100n1": 2, "k80n1": 4})],
        9: [run(0, 120.0, 130.0, {"elsewhere": 1})],  # not a managed node: not drawn
    }
    doc = timeline_payload(runs, {}, NODES, [(100.0, 3), (150.0, 1)], since=100.0, now=200.0)
    svg = render_svg(doc)
    rects = re.findall(r"<rect class='bar ([a-z]+)' data-job='(\d+)'[^>]*data-node='([^']+)' "
                       r"data-start='([\d.]+)' data-end='([\d.]+)' x='([\d.]+)' y='\d+' "
                       r"width='([\d.]+)'", svg)  # fmt: skip
    assert {(k, int(j), n) for k, j, n, *_ in rects} == {
        ("profiling", 7, "a100n1"), ("run", 8, "a100n1"), ("run", 8, "k80n1"),
    }  # fmt: skip
    scale = (WIDTH - LABEL) / (200.0 - 100.0)
    for _, _, _, start, end, x, width in rects:
        assert float(x) == pytest.approx(LABEL + (float(start) - 100.0) * scale, abs=0.01)
        assert float(width) == pytest.approx((float(end) - float(start)) * scale, abs=0.01)
    a100 = dict((t, v) for t, v in doc["utilisation"]["a100"])
    k80 = dict((t, v) for t, v in doc["utilisation"]["k80"])
    assert a100[100.0] == 0.5 and k80[100.0] == 0.0  # the profiling run's 2 of 4
    assert a100[200.0] == 0.5 and k80[200.0] == 1.0  # job 8 to now
    assert doc["queue"] == [[100.0, 3], [150.0, 1]]


def test_the_page_draws_the_timeline_counts_profiling_as_running_and_reloads_itself() -> None:
    timeline = timeline_payload({7: [run(0, 100.0, None, {"a100n1": 1}, "profiling")]}, {},
                                NODES, [], 100.0, 160.0)  # fmt: skip
    status = {
        "jobs": [{"job_id": 7, "user": "u", "state": "profiling", "gpu_type": "a100",
                  "nodes": {"a100n1": 1}, "demands": [1], "wait_s": 0.0, "latency_ratio": 0.0,
                  "eta_s": None, "reason": "profiling on a100 a100n1:1", "problem": None}],
        "cluster": [], "raqlr": 0.0, "raqlr_window_h": 24.0, "slurm_error": None,
        "leader": {"holder": "", "since": 0.0, "expires_at": 0.0, "token": 0},
    }  # fmt: skip
    page = render(status, {"jobs": [], "users": [], "jain_users": 1.0}, {"rounds": []}, timeline)
    assert "<h2>Running (1)</h2>" in page and "<h2>Queue (0)</h2>" in page
    assert "http-equiv='refresh'" in page and "<svg id='timeline'" in page
    assert "data-job='7'" in page and "<script" not in page


def test_a_moves_new_run_is_held_only_once_its_old_run_ended() -> None:
    """A move decides the new run's release with the stop: the GPUs are held for the new
    run from the old run's end (its grace is drawn as grace), not from the decision."""
    runs = {7: [run(0, 100.0, 160.0, {"a100n1": 2}), run(1, 165.0, None, {"a100n1": 2})]}
    bars = bars_of(runs, {(7, 0): 150.0}, {"a100n1": 4}, 0.0, 200.0, {(7, 1): 148.0})
    got = [(b.run, b.kind, b.start, b.end) for b in bars]
    assert got == [
        (0, "run", 100.0, 150.0),
        (0, "grace", 150.0, 160.0),
        (1, "held", 160.0, 165.0),
        (1, "run", 165.0, 200.0),
    ]
    assert bars[2].lane == bars[0].lane  # the lanes its old run left


def test_a_run_taking_a_preempted_jobs_gpus_is_held_from_that_jobs_end() -> None:
    """Job 8 was released onto job 7's GPUs at 150, with job 7's preemption: 7 checkpoints
    until 160, and 8's GPUs are held from then, on the lanes 7 left, never drawn over 7."""
    runs = {7: [run(0, 100.0, 160.0, {"a100n1": 4})], 8: [run(0, 165.0, None, {"a100n1": 4})]}
    bars = bars_of(runs, {}, {"a100n1": 4}, 0.0, 200.0, {(8, 0): 150.0})
    got = [(b.job_id, b.kind, b.start, b.end, b.lane) for b in bars]
    assert (8, "held", 160.0, 165.0, 0) in got and (7, "run", 100.0, 160.0, 0) in got


def test_a_start_in_the_same_second_as_the_preempted_jobs_end_is_never_drawn_over_it() -> None:
    """Slurm stamps a start in whole seconds; hops may see the preempted job end a moment
    into that second. The new run's GPUs are still held from that end, not from the
    release during the grace, so no held bar covers the grace."""
    runs = {7: [run(0, 100.0, 160.0006, {"a100n1": 4})], 8: [run(0, 160.0, None, {"a100n1": 4})]}
    bars = bars_of(runs, {(7, 0): 157.0}, {"a100n1": 4}, 0.0, 200.0, {(8, 0): 150.0})
    grace = [b for b in bars if b.kind == "grace"]
    assert [(b.job_id, b.start, b.end) for b in grace] == [(7, 157.0, 160.0006)]
    assert not [b for b in bars if b.job_id == 8 and b.kind == "held"]
    assert [(b.kind, b.start) for b in bars if b.job_id == 8] == [("run", 160.0)]
