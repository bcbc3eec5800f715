"""Fuzzing every parser of user-controlled input, and whole ticks built from such input.

Inputs covered (generated from scratch and mutated from valid examples):

* bounded JSON (:func:`hopsd.userdata.load_json`): any bytes or text;
* hops tags in a job's comment (:func:`hopsd.slurm.tag.decode`);
* probe report lines ``<job>.jsonl`` (:func:`hopsd.daemon.job_reports.parse_line`);
* progress files ``<job>.progress.json`` (:func:`hopsd.daemon.job_reports.parse_progress`);
* Slurm job fields: working directory, owner, account, name, output pattern
  (:func:`hopsd.userdata.work_dir_problem`, :func:`hopsd.userdata.slurm_field_problem`),
  also inside a recorded ``squeue --json`` reply parsed and checked for adoption;
* a whole tick over an in-memory Slurm where one user's jobs carry a fuzzed
  tag, a fuzzed progress file and a fuzzed report, beside an honest user's job.

Each parser may only refuse with its own error type (never another exception,
never ``RecursionError``); the tick must complete and the honest job must be
planned and started. ``#SBATCH`` headers and ``hops submit`` options are fuzzed
in ``tests/cli/test_submit_fuzz.py``. Example budgets are fixed and small so the
suite stays fast; the seed is derandomised so CI runs are repeatable.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from daemon_fakeport import FakeClock, FakePort, small_cluster
from hops_conf import FAKE, merged, render
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hopsd.config import parse_config
from hopsd.daemon.adoption import check_tag
from hopsd.daemon.job_reports import ProgressReport, parse_line, parse_progress
from hopsd.daemon.observe import job_view
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.tick import Tick
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.jobs import get_job
from hopsd.ledger.models import Base, JobState
from hopsd.slurm.errors import TagError
from hopsd.slurm.parse_squeue import parse_jobs
from hopsd.slurm.tag import HopsTag, decode
from hopsd.userdata import (
    JSON_LIMITS,
    UserDataError,
    load_json,
    slurm_field_problem,
    work_dir_problem,
)

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TICK_FUZZ = settings(FUZZ, max_examples=25)

RUN_LINE = {
    "kind": "run", "iterations": 10, "samples": 320, "seconds": 1.0, "busy_s": 0.9,
    "t_d": [0.01, 0.02], "t_w": [0.0], "t_d_sum": 0.03, "t_w_sum": 0.0, "loader": False,
    "v": 1, "job": 101, "run": 0, "node": "slow1", "seq": 1, "at": 1e9, "samples_done": 320,
}  # fmt: skip
PROGRESS = {"samples_done": 640, "per_gpu": 100.0, "at": 1e9, "nodes": ["slow1"], "gpus": 1,
            "gpu_type": "k80", "restarts": 0}  # fmt: skip
TAG_TEXT = HopsTag((1, 2), 1e6, 32, "resnet50", 2.5e7, (0.1,), "linear").encode()

HOSTILE_SNIPPETS = [
    "NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" + "0" * 400, "[" * 5000,
    '{"a":' * 3000, '"\\ud800"', "\x00", "\\", '"', "{}", "[]", "null", "true", ",", ":",
    '"samples_done":1,"samples_done":2', "\n", "\u2028", "\xff",
]  # fmt: skip


def _apply(base: str, ops: list[tuple[int, int, str]]) -> str:
    """Insert, delete or replace at drawn positions (a grammar-blind mutator)."""
    text = base
    for kind, pos, snippet in ops:
        at = pos % (len(text) + 1)
        if kind == 0:
            text = text[:at] + snippet + text[at:]
        elif kind == 1:
            text = text[:at] + text[at + len(snippet) + 1 :]
        else:
            text = text[:at] + snippet + text[at + len(snippet) :]
    return text


def mutated(base: str) -> st.SearchStrategy[str]:
    snippet = st.one_of(st.sampled_from(HOSTILE_SNIPPETS), st.text(max_size=12))
    op = st.tuples(st.integers(0, 2), st.integers(0, 10_000), snippet)
    return st.lists(op, min_size=1, max_size=6).map(lambda ops: _apply(base, ops))


def nested(depth: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    return st.tuples(depth, st.sampled_from(["[", '{"k":', '{"samples_done":['])).map(
        lambda t: t[1] * t[0]
    )


def hostile_text(base: str) -> st.SearchStrategy[str]:
    return st.one_of(
        mutated(base),
        st.text(max_size=300),
        nested(st.integers(1, 25_000)),
        st.sampled_from(HOSTILE_SNIPPETS),
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.floats(), st.integers(), st.text(max_size=8)),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=12), inner, max_size=4)
            ),
            max_leaves=30,
        ).map(lambda v: json.dumps(v, allow_nan=True)),
    )


# -- parsers ----------------------------------------------------------------------------


@FUZZ
@given(st.one_of(st.binary(max_size=400), hostile_text(json.dumps(PROGRESS)).map(str.encode)))
def test_bounded_json_refuses_only_with_user_data_error(data: bytes) -> None:
    try:
        value = load_json(data, JSON_LIMITS, "input")
    except UserDataError:
        return
    assert _finite_everywhere(value)


@FUZZ
@given(hostile_text(TAG_TEXT))
def test_tag_decoding_refuses_only_with_tag_error(comment: str) -> None:
    try:
        tag = decode(comment)
    except TagError:
        return
    assert all(math.isfinite(x) for x in (tag.total_samples, tag.params, *tag.lr))
    assert tag.encode() == decode(tag.encode()).encode()  # what is accepted round-trips


@FUZZ
@given(hostile_text(json.dumps(RUN_LINE)))
def test_report_lines_refuse_only_with_user_data_error(line: str) -> None:
    try:
        report = parse_line(line.encode("utf-8", "surrogatepass"), 101)
    except UserDataError:
        return
    assert math.isfinite(report.at) and report.run >= 0


@FUZZ
@given(hostile_text(json.dumps(PROGRESS)))
def test_progress_files_refuse_only_with_user_data_error(text: str) -> None:
    try:
        progress = parse_progress(text.encode("utf-8", "surrogatepass"))
    except UserDataError:
        return
    assert isinstance(progress, ProgressReport)
    numbers = [progress.samples_done, progress.at, progress.per_gpu]
    assert all(math.isfinite(v) for v in numbers if v is not None)


@FUZZ
@given(st.text(max_size=200), st.text(max_size=80), st.text(max_size=80), st.text(max_size=200))
def test_slurm_field_checks_never_raise(path: str, user: str, account: str, name: str) -> None:
    problem = work_dir_problem(path)
    assert isinstance(problem, str)
    if not problem:
        assert path.startswith("/") and path.isprintable()
    verdict = slurm_field_problem(user, account, name, path)
    if not verdict:
        assert len(user) <= 64 and len(account) <= 64


def _finite_everywhere(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


# -- whole ticks ------------------------------------------------------------------------


def conf_with_spool(spool: Path) -> str:
    """The fake cluster's hops.conf on ``spool``; no checkpoint notice, so moves requeue at once."""
    return render(merged(FAKE, {"daemon": {"spool_dir": str(spool), "checkpoint_grace_s": 0.0}}))


@TICK_FUZZ
@given(
    comment=hostile_text(TAG_TEXT),
    progress=hostile_text(json.dumps(PROGRESS)),
    lines=st.lists(hostile_text(json.dumps(RUN_LINE)), min_size=1, max_size=4),
)
def test_a_tick_over_fuzzed_inputs_completes_and_plans_the_honest_job(
    comment: str, progress: str, lines: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spool = root / "spool"
        spool.mkdir()
        engine = make_engine(f"sqlite:///{root / 'ledger.sqlite'}", sqlite_begin="immediate")
        Base.metadata.create_all(engine)
        sessions = make_sessionmaker(engine)
        port, clock = FakePort(small_cluster()), FakeClock()
        sensing = Sensing(spool, uid_of=lambda user: os.getuid())
        tick = Tick(parse_config(conf_with_spool(spool)), port, sessions, clock=clock,
                    sensing=sensing)  # fmt: skip
        by_progress = port.add_job(HopsTag((1,), 1e6), user="mallory")
        by_report = port.add_job(HopsTag((1,), 1e6), user="mallory")
        by_tag = port.add_job(None, user="mallory", comment=comment[:2000])
        tick.run_once()
        (spool / "mallory" / f"{by_progress}.progress.json").write_bytes(
            progress.encode("utf-8", "surrogatepass")
        )
        text = "\n".join(lines) + "\n"
        report = spool / "mallory" / f"{by_report}.jsonl"
        report.write_bytes(text.encode("utf-8", "surrogatepass"))
        honest = port.add_job(HopsTag((1,), 1e6), user="alice")
        for _ in range(3):
            clock.advance(1)
            tick.run_once()
        assert port.jobs[honest].state == "RUNNING"
        with sessions.begin() as s:
            row = get_job(s, str(honest))
            assert row is not None and row.state == JobState.RUNNING
            for job in (by_progress, by_report):
                mine = get_job(s, str(job))
                assert mine is not None and math.isfinite(mine.samples_done)
        assert port.jobs[by_tag].state in ("PENDING", "RUNNING")
        engine.dispose()


# -- the user-controlled fields of a recorded squeue reply ---------------------------------

SQUEUE = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "squeue.22.05.json"
USER_FIELDS = ("comment", "name", "current_working_directory", "standard_output", "account")


@FUZZ
@given(
    field=st.sampled_from(USER_FIELDS),
    value=st.one_of(
        hostile_text(TAG_TEXT).map(lambda t: "hops1:" + t),
        st.text(max_size=300),
        st.sampled_from(["%j%u%x%A%a%%" * 500, "/" + "d" * 5000, "rel/dir", "a" * 200]),
        st.none(),
        st.integers(),
        st.lists(st.integers(), max_size=3),
    ),
)
def test_squeue_records_with_fuzzed_user_fields_parse_into_checked_jobs(
    field: str, value: Any
) -> None:
    doc = json.loads(SQUEUE.read_text())
    for record in doc["jobs"]:
        record[field] = value
    for job in parse_jobs(json.dumps(doc)):
        seen = job_view(job)
        spec, reason = check_tag(seen, largest_config=8, max_demand=256)
        assert (spec is None) == bool(reason)
        if spec is not None:
            assert len(spec.user) <= 64 and len(spec.account) <= 64
        assert isinstance(work_dir_problem(seen.work_dir), str)
