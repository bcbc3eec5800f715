"""Each Slurm spelling, run through the hops commands, means what its plain spelling means.

squeue's and sacct's options (``-t/--states``, ``-s/--state``, ``-S/--starttime``,
``-E/--endtime``, ``-j`` lists, ``-P``, ``-h``/``-n``, ``-o``) and sacct's time
formats are given to ``hops status``, ``hops history`` and ``hops replay`` on a
small ledger, under a clock stopped on a whole minute and in a zone east of UTC
by a non-whole hour (so that a time read in the wrong zone moves by 5.5 h). Each
row checks the command selects the same jobs, or the same window, as the
canonical spelling, and that this is the selection Slurm's meaning gives.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.jobs import JobSpec, add_job
from hopsd.ledger.jobs import transition as job_transition
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.models import JobState

runner = CliRunner()
S = JobState
HOUR, DAY = 3600.0, 86400.0
#: UTC+05:30 as a POSIX TZ string (needs no zone database).
ZONE = "XST-5:30"

#: Ended jobs: Slurm id -> (end state, seconds before now it ended).
ENDED = {
    301: (S.DONE, 0.5 * HOUR),
    302: (S.FAILED, 3 * HOUR),
    303: (S.CANCELLED, 26 * HOUR),
    304: (S.DONE, 4 * DAY),
    305: (S.FAILED, 10 * DAY),
}
#: Live jobs: Slurm id -> the path through hops's states it took.
LIVE = {
    311: (S.QUEUED,),
    312: (S.QUEUED, S.RUNNING),
    313: (S.QUEUED, S.RUNNING, S.PREEMPTED),
    314: (S.PROFILING,),
    315: (S.QUEUED, S.RUNNING, S.REQUEUED),
}
WAITING = {311, 313, 315}  # squeue's PD: queued, preempted, requeued
RUNNING = {312, 314}  # squeue's R: running and profiling


@pytest.fixture
def clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, port: Any) -> Iterator[float]:
    """The ledger above, the clock stopped at its now (a whole minute), the zone UTC+05:30."""
    del port
    now = float(int(time.time()) // 60 * 60)
    monkeypatch.setenv("TZ", ZONE)
    time.tzset()
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    with make_sessionmaker(engine).begin() as session:
        for job_id, (end, ago) in ENDED.items():
            row = _job(session, job_id, now - ago - HOUR)
            job_transition(row, S.QUEUED, now - ago - HOUR)
            job_transition(row, S.RUNNING, now - ago - HOUR / 2)
            job_transition(row, end, now - ago)
        for job_id, path in LIVE.items():
            row = _job(session, job_id, now - 2 * HOUR)
            for step, state in enumerate(path):
                job_transition(row, state, now - HOUR + 60 * step)
    engine.dispose()
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "{url}"\n')
    monkeypatch.setenv("HOPS_CONF", str(conf))
    monkeypatch.setattr(time, "time", lambda: now)
    yield now
    monkeypatch.undo()
    time.tzset()


def _job(session: Any, job_id: int, submitted: float) -> Any:
    return add_job(
        session,
        JobSpec(f"j{job_id}", "alice", (1,), 1e6, submitted, slurm_job_id=job_id),
        submitted,
    )


def _run(argv: list[str]) -> str:
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, (argv, result.output)
    return result.stdout


def _ids(argv: list[str]) -> set[int]:
    return {job["job_id"] for job in json.loads(_run([*argv, "--all", "--json"]))["jobs"]}


#: (spelling as squeue or sacct users write it, hops's plain spelling, the jobs meant).
STATE_ROWS = [
    (["status", "--states", "PD"], ["status", "-t", "PENDING"], WAITING),
    (["status", "--states=R"], ["status", "--state", "running,profiling"], RUNNING),
    (["status", "-t", "pd,r"], ["status", "--states", "PENDING,RUNNING"], WAITING | RUNNING),
    (["status", "--states", "CD"], ["status", "-t", "done"], {301, 304}),
    (
        ["status", "--states", "all"],
        ["status", "-t", ",".join(s.value for s in S)],
        set(ENDED) | set(LIVE),
    ),
    (
        ["history", "-S", "now-30days", "-s", "CD"],
        ["history", "-S", "now-30days", "--state", "done"],
        {301, 304},
    ),
    (
        ["history", "-S", "now-30days", "-s", "cd,F"],
        ["history", "-S", "now-30days", "-t", "done,failed"],
        {301, 302, 304, 305},
    ),
    (
        ["history", "-S", "now-30days", "--state", "CA"],
        ["history", "-S", "now-30days", "-s", "cancelled"],
        {303},
    ),
    (
        ["history", "-S", "now-30days", "-s", "TO,OOM"],
        ["history", "-S", "now-30days", "-s", "FAILED"],
        {302, 305},
    ),
    (
        ["history", "-S", "now-30days", "-s", "COMPLETED,CANCELLED"],
        ["history", "-S", "now-30days", "-t", "done", "-t", "cancelled"],
        {301, 303, 304},
    ),
    (["status", "-j", "311,312"], ["status", "311", "312"], {311, 312}),
    (
        ["status", "-j311,315", "-j", "313"],
        ["status", "--jobs", "311", "313", "315"],
        {311, 313, 315},
    ),
    (
        ["history", "-S", "now-30days", "-j", "301,303,311"],
        ["history", "-S", "now-30days", "301", "303"],
        {301, 303},
    ),
]


@pytest.mark.parametrize(
    ("spelled", "plain", "meant"), STATE_ROWS, ids=[" ".join(r[0]) for r in STATE_ROWS]
)
def test_states_and_job_lists_select_what_the_plain_spelling_selects(
    clock: float, spelled: list[str], plain: list[str], meant: set[int]
) -> None:
    assert _ids(spelled) == _ids(plain) == meant


def _local(at: float, form: str) -> str:
    return datetime.fromtimestamp(at).strftime(form)


def _midnight(at: float) -> float:
    return datetime.fromtimestamp(at).replace(hour=0, minute=0, second=0).timestamp()


#: (row id, the spelling at ``now``, the instant it means at ``now``), instants far from
#: every job's end so that each spelling splits the jobs where it should.
TIME_ROWS: list[tuple[str, Callable[[float], str], Callable[[float], float]]] = [
    ("now-1day", lambda n: "now-1day", lambda n: n - DAY),
    ("now-2hours", lambda n: "now-2hours", lambda n: n - 2 * HOUR),
    ("now-5days", lambda n: "now-5days", lambda n: n - 5 * DAY),
    ("24h", lambda n: "24h", lambda n: n - DAY),
    ("ISO datetime", lambda n: _local(n - 5 * HOUR, "%Y-%m-%dT%H:%M"), lambda n: n - 5 * HOUR),
    ("ISO seconds", lambda n: _local(n - 2 * HOUR, "%Y-%m-%dT%H:%M:%S"), lambda n: n - 2 * HOUR),
    ("ISO date", lambda n: _local(n - 2 * DAY, "%Y-%m-%d"), lambda n: _midnight(n - 2 * DAY)),
    ("MMDD", lambda n: _local(n - 2 * DAY, "%m%d"), lambda n: _midnight(n - 2 * DAY)),
    ("MM/DD", lambda n: _local(n - 7 * DAY, "%m/%d"), lambda n: _midnight(n - 7 * DAY)),
    ("MM/DD/YY", lambda n: _local(n - 7 * DAY, "%m/%d/%y"), lambda n: _midnight(n - 7 * DAY)),
    ("MM/DD-HH:MM", lambda n: _local(n - 5 * HOUR, "%m/%d-%H:%M"), lambda n: n - 5 * HOUR),
    ("HH:MM", lambda n: _local(n - 5 * HOUR, "%H:%M"), lambda n: n - 5 * HOUR),
    ("epoch", lambda n: str(int(n - 2 * HOUR)), lambda n: n - 2 * HOUR),
]
TIME_IDS = [r[0] for r in TIME_ROWS]


def _canonical(at: float) -> str:
    """The instant as an ISO local time: the spelling every other one is compared with."""
    return _local(at, "%Y-%m-%dT%H:%M:%S")


def _ended(now: float, lo: float = float("-inf"), hi: float = float("inf")) -> set[int]:
    """The ended jobs whose end lies in ``[lo, hi]``: what sacct's window selects."""
    return {job for job, (_, ago) in ENDED.items() if lo <= now - ago <= hi}


# Each bound's spellings, its canonical flag, and what the command line holds before it
# (an end needs a start far enough back to see every ended job).
BOUND_FLAGS = [
    *((flag, "-S", ()) for flag in ("-S", "--starttime", "--since")),
    *((flag, "-E", ("-S", "now-30days")) for flag in ("-E", "--endtime", "--until")),
]
BOUND_IDS = [flag for flag, _, _ in BOUND_FLAGS]


@pytest.mark.parametrize(("name", "spell", "instant"), TIME_ROWS, ids=TIME_IDS)
@pytest.mark.parametrize(("flag", "canonical", "before"), BOUND_FLAGS, ids=BOUND_IDS)
def test_history_bounds_where_the_time_says(
    clock: float,
    name: str,
    spell: Callable[[float], str],
    instant: Callable[[float], float],
    flag: str,
    canonical: str,
    before: tuple[str, ...],
) -> None:
    del name
    at = instant(clock)
    spelled = _ids(["history", *before, flag, spell(clock)])
    assert spelled == _ids(["history", *before, canonical, _canonical(at)])
    bound = {"lo": at} if canonical == "-S" else {"hi": at}
    assert spelled == _ended(clock, **bound)
    assert spelled != _ended(clock)  # the instant splits the jobs: a wrong one would show


@pytest.fixture
def windows(clock: float, monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """The windows ``hops replay`` asks to replay, recorded instead of replayed.

    The window is all the options decide; what a replay makes of it is
    tests/sim/test_replay_cli.py's business.
    """
    del clock
    asked: list[tuple[float, float]] = []

    def record(config: Any, lo: float, hi: float, *args: Any) -> dict[str, Any]:
        asked.append((lo, hi))
        return {"window": {"from": lo, "to": hi}}

    monkeypatch.setattr("hops_cli.replay.replay_payload", record)
    return asked


@pytest.mark.parametrize(("name", "spell", "instant"), TIME_ROWS, ids=TIME_IDS)
@pytest.mark.parametrize(("start", "end"), [("-S", "-E"), ("--starttime", "--endtime")])
def test_replay_window_is_the_one_the_times_say(
    clock: float,
    windows: list[tuple[float, float]],
    name: str,
    spell: Callable[[float], str],
    instant: Callable[[float], float],
    start: str,
    end: str,
) -> None:
    del name
    now = clock
    at = instant(now)
    _run(["replay", start, spell(now), "--json"])
    _run(["replay", "--from", _canonical(at), "--json"])
    _run(["replay", start, "now-30days", end, spell(now), "--json"])
    _run(["replay", "--from", "now-30days", "--to", _canonical(at), "--json"])
    assert windows == [(at, now), (at, now), (now - 30 * DAY, at), (now - 30 * DAY, at)]


def test_replay_since_is_a_start_up_to_now_as_s_is(
    clock: float, windows: list[tuple[float, float]]
) -> None:
    _run(["replay", "--since", "now-1day", "--json"])
    _run(["replay", "-S", "now-1day", "--json"])
    assert windows == [(clock - DAY, clock)] * 2
    both = runner.invoke(app, ["replay", "--since", "24h", "-S", "now-1day"])
    assert both.exit_code == 2 and "either --since or --from/--to (-S/-E)" in both.stderr
    alone = runner.invoke(app, ["replay", "-E", "now"])
    assert alone.exit_code == 2 and "-E/--to needs -S/--from" in alone.stderr
    bad = runner.invoke(app, ["replay", "-S", "13/45"])
    assert bad.exit_code == 2 and "-S/--from: not a time: '13/45'" in bad.stderr


#: (short and Slurm spellings of the table options, their long hops spelling, first line).
TABLE_ROWS = [
    (
        ["status", "--all", "-P", "-o", "jobid,state"],
        ["status", "--all", "--parsable", "--format", "jobid,state"],
        "JOBID|STATE",
    ),
    (
        ["status", "--all", "-hP", "-o", "JobID,user"],
        ["status", "--all", "--noheader", "--parsable", "-o", "jobid,user"],
        "311|alice",
    ),
    (
        ["status", "--all", "-h", "-o", "jobid,user"],
        ["status", "--all", "--noheader", "--format=jobid,user"],
        "311  alice",
    ),
    (
        ["history", "--all", "-S", "now-30days", "-P", "-o", "jobid,state"],
        ["history", "--all", "--since", "now-30days", "--parsable", "--format", "jobid,state"],
        "JOBID|STATE",
    ),
    (
        ["history", "--all", "-S", "now-30days", "-nP", "-o", "jobid,state"],
        [
            "history",
            "--all",
            "--since",
            "now-30days",
            "--noheader",
            "--parsable",
            "-o",
            "jobid,state",
        ],
        "305|failed",
    ),
    (
        ["nodes", "-hP", "-o", "node,gpus"],
        ["nodes", "--noheader", "--parsable", "--format", "node,gpus"],
        "a100n1|4",
    ),
    (
        ["fairness", "-nP", "-o", "jobid,user"],
        ["fairness", "--noheader", "--parsable", "--format", "jobid,user"],
        "311|alice",
    ),
]


@pytest.mark.parametrize(
    ("short", "long", "first"), TABLE_ROWS, ids=[" ".join(r[0]) for r in TABLE_ROWS]
)
def test_table_options_print_what_their_long_names_print(
    clock: float, short: list[str], long: list[str], first: str
) -> None:
    printed = _run(short)
    assert printed == _run(long)
    assert printed.splitlines()[0] == first


def test_status_p_is_parsable_and_h_still_drops_the_header(clock: float) -> None:
    lines = _run(["status", "--all", "-P", "-t", "R", "-o", "jobid,state"]).splitlines()
    assert lines == ["JOBID|STATE", "312|running", "314|profiling"]
    bare = _run(["status", "--all", "-hP", "-t", "PD", "-o", "jobid,user"]).splitlines()
    assert bare == ["311|alice", "313|alice", "315|alice"]


def test_history_prints_local_times_that_s_reads_back(clock: float) -> None:
    """sacct prints and reads times in the local zone: a copied END selects its job again."""
    lines = _run(["history", "--all", "-S", "now-30days", "-nP", "-o", "jobid,end"]).splitlines()
    ends = dict(line.split("|") for line in lines)
    assert ends["302"] == _local(clock - 3 * HOUR, "%Y-%m-%dT%H:%M:%S")
    again = _ids(["history", "-S", ends["302"], "-E", ends["301"]])
    assert again == {301, 302}
