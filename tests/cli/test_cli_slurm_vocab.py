"""Slurm's own words in the hops commands: squeue/sacct state names and codes, -j job lists,
-h, sacct's time formats, hub-style model names, sample counts with suffixes, and the
table options of every table. Each spelling means what it means to squeue or sacct; a
bad one is one ``hops:`` line and exit 2."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_scripts import train_script
from typer.testing import CliRunner

from hops_cli.main import app
from hops_cli.states import HOPS_STATES, UnknownState, hops_states
from hops_cli.timespec import parse_time
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.jobs import JobSpec, add_job
from hopsd.ledger.jobs import transition as job_transition
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.models import JobState
from hopsd.slurm.tag import decode

runner = CliRunner()

#: Slurm job id -> the path through hops's states that job took (one job per state).
PATHS: dict[int, tuple[JobState, ...]] = {
    201: (),
    202: (JobState.PROFILING,),
    203: (JobState.QUEUED,),
    204: (JobState.QUEUED, JobState.RUNNING),
    205: (JobState.QUEUED, JobState.RUNNING, JobState.PREEMPTED),
    206: (JobState.QUEUED, JobState.RUNNING, JobState.REQUEUED),
    207: (JobState.QUEUED, JobState.RUNNING, JobState.DONE),
    208: (JobState.QUEUED, JobState.RUNNING, JobState.FAILED),
    209: (JobState.QUEUED, JobState.CANCELLED),
}
ID_OF = {(path[-1] if path else JobState.SUBMITTED).value: job for job, path in PATHS.items()}


@pytest.fixture
def every_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, port: Any) -> Iterator[float]:
    """A ledger with one job in each hops state, all ended ones within the last hour."""
    del port
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    now = time.time()
    with make_sessionmaker(engine).begin() as session:
        for job_id, path in PATHS.items():
            row = add_job(
                session,
                JobSpec(f"j{job_id}", "alice", (1,), 1e6, now - 3600, slurm_job_id=job_id),
                now - 3600,
            )
            for step, state in enumerate(path):
                job_transition(row, state, now - 3000 + 100 * step)
    engine.dispose()
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "{url}"\n')
    monkeypatch.setenv("HOPS_CONF", str(conf))
    yield now


def ids(argv: list[str]) -> set[int]:
    result = runner.invoke(app, [*argv, "--all", "--json"])
    assert result.exit_code == 0, result.output
    return {job["job_id"] for job in json.loads(result.stdout)["jobs"]}


def jobs_in(*states: str) -> set[int]:
    return {ID_OF[s] for s in states}


WAITING = ("submitted", "queued", "preempted", "requeued")

#: squeue -t: the spelling, and the hops states it selects in ``hops status``.
STATUS_SPELLINGS = [
    ("PD", WAITING),
    ("pending", WAITING),
    ("R", ("running", "profiling")),
    ("Running", ("running", "profiling")),
    ("CD", ("done",)),
    ("COMPLETED", ("done",)),
    ("CA", ("cancelled",)),
    ("cancelled", ("cancelled",)),
    ("F", ("failed",)),
    ("FAILED", ("failed",)),
    ("TO", ("failed",)),
    ("timeout", ("failed",)),
    ("NF", ("failed",)),
    ("OOM", ("failed",)),
    ("out_of_memory", ("failed",)),
    ("BF", ("failed",)),
    ("DL", ("failed",)),
    ("PR", ("preempted",)),
    ("PREEMPTED", ("preempted",)),
    ("RH", ("preempted",)),
    ("RQ", ("requeued",)),
    ("REQUEUED", ("requeued",)),
    ("CG", ()),
    ("COMPLETING", ()),
    ("S", ()),
    ("suspended", ()),
    ("PD,R", (*WAITING, "running", "profiling")),
    ("pd,cd,ca", (*WAITING, "done", "cancelled")),
    ("queued", ("queued",)),
    ("profiling", ("profiling",)),
    ("submitted", ("submitted",)),
    ("all", HOPS_STATES),
]


@pytest.mark.parametrize(("spelling", "selected"), STATUS_SPELLINGS)
def test_squeue_states_select_the_hops_states_that_mean_the_same(
    spelling: str, selected: tuple[str, ...]
) -> None:
    assert hops_states(spelling.split(",")) == frozenset(selected)


@pytest.mark.parametrize(("spelling", "selected"), STATUS_SPELLINGS)
def test_hops_status_t_lists_those_jobs(
    every_state: float, spelling: str, selected: tuple[str, ...]
) -> None:
    assert ids(["status", "-t", spelling]) == jobs_in(*selected)


#: sacct -s: the spelling, and the ended hops states it selects in ``hops history``.
HISTORY_SPELLINGS = [
    ("CD", ("done",)),
    ("completed", ("done",)),
    ("CA", ("cancelled",)),
    ("F", ("failed",)),
    ("TO", ("failed",)),
    ("NF", ("failed",)),
    ("OOM", ("failed",)),
    ("PR", ("failed",)),  # preempted and not requeued: an end hops records as failed
    ("cd,F", ("done", "failed")),
    ("done", ("done",)),
    ("all", ("done", "failed", "cancelled")),
]


@pytest.mark.parametrize(("spelling", "selected"), HISTORY_SPELLINGS)
def test_hops_history_t_takes_sacct_states(
    every_state: float, spelling: str, selected: tuple[str, ...]
) -> None:
    assert hops_states(spelling.split(","), ended_only=True) == frozenset(selected)
    assert ids(["history", "-t", spelling, "-S", "now-1day"]) == jobs_in(*selected)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["status", "-t", "sleeping"], "unknown state sleeping"),
        (["status", "-t", "PD,XX"], "unknown state XX"),
        (["history", "-t", "R"], "state R is not one an ended job has"),
        (["history", "-t", "pending"], "not one an ended job has"),
        (["history", "-t", "CG"], "not one an ended job has"),
        (["history", "-S", "yesterday-ish"], "--since: not a time"),
        (["history", "-E", "13/45"], "--until: not a time"),
        (["replay", "--from", "now-3parsecs"], "--from: not a time"),
        (["nodes", "-o", "node,colour"], "unknown column COLOUR"),
        (["fairness", "-o", "jobid,colour"], "unknown column COLOUR"),
    ],
)
def test_bad_spellings_are_one_line_and_exit_2(
    every_state: float, argv: list[str], words: str
) -> None:
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hops: ") and words in lines[0], result.stderr


def test_unknown_state_is_its_own_error_type() -> None:
    with pytest.raises(UnknownState, match="Slurm's names and codes"):
        hops_states(["zombie"])


def test_jobs_option_lists_ids_like_squeue_j(every_state: float) -> None:
    assert ids(["status", "-j", "203,204"]) == {203, 204}
    assert ids(["status", "--jobs", "203", "-j", "205", "201"]) == {201, 203, 205}
    assert ids(["history", "-j", "207,209,204", "-S", "now-1day"]) == {207, 209}


def test_h_is_help_and_status_keeps_h_for_noheader(every_state: float) -> None:
    shown = runner.invoke(app, ["-h"])
    assert shown.exit_code == 0 and "Usage" in shown.stdout and "--help" in shown.stdout
    assert "Usage" in runner.invoke(app, ["history", "-h"]).stdout
    bare = runner.invoke(app, ["status", "--all", "-h", "-o", "jobid", "-t", "R"])
    assert bare.exit_code == 0 and sorted(bare.stdout.split()) == ["202", "204"]  # R: profiling too


NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC).timestamp()

#: sacct's time formats (and hops's durations), read at 2026-12-02T10:00Z.
TIMES = [
    ("now", "2026-12-02T10:00:00"),
    ("now-1day", "2026-12-01T10:00:00"),
    ("now-24hours", "2026-12-01T10:00:00"),
    ("now-30minutes", "2026-12-02T09:30:00"),
    ("now-2weeks", "2026-11-18T10:00:00"),
    ("now-90", "2026-12-02T09:58:30"),
    ("NOW-1DAY", "2026-12-01T10:00:00"),
    ("24h", "2026-12-01T10:00:00"),
    ("7d", "2026-11-25T10:00:00"),
    ("30m", "2026-12-02T09:30:00"),
    ("-3d", "2026-11-29T10:00:00"),
    ("2026-12-01T10:00:00", "2026-12-01T10:00:00"),
    ("2026-12-01T10:00", "2026-12-01T10:00:00"),
    ("2026-12-01", "2026-12-01T00:00:00"),
    ("2026-12-01T10:00+02:00", "2026-12-01T08:00:00"),
    ("1201", "2026-12-01T00:00:00"),
    ("120125", "2025-12-01T00:00:00"),
    ("12/01", "2026-12-01T00:00:00"),
    ("12/01/25", "2025-12-01T00:00:00"),
    ("12.01", "2026-12-01T00:00:00"),
    ("12/01-08:30", "2026-12-01T08:30:00"),
    ("1201-08:30:15", "2026-12-01T08:30:15"),
    ("12/31", "2025-12-31T00:00:00"),  # still to come this year: last year's, as sacct
    ("09:30", "2026-12-02T09:30:00"),
    ("09:30:15", "2026-12-02T09:30:15"),
    ("11:00", "2026-12-01T11:00:00"),  # still to come today: yesterday's
    ("9:30am", "2026-12-02T09:30:00"),
    ("11:00PM", "2026-12-01T23:00:00"),
    ("midnight", "2026-12-02T00:00:00"),
    ("noon", "2026-12-01T12:00:00"),
    ("1764583200", "2025-12-01T10:00:00"),
]


@pytest.mark.parametrize(("text", "expected"), TIMES)
def test_sacct_time_formats(text: str, expected: str) -> None:
    when = datetime.fromtimestamp(parse_time(text, NOW, tz=UTC), UTC)
    assert when.strftime("%Y-%m-%dT%H:%M:%S") == expected


@pytest.fixture
def new_york(set_zone: Callable[[str], None]) -> None:
    """US Eastern time with its daylight-saving rule, as a POSIX TZ (no zone database)."""
    set_zone("EST5EDT,M3.2.0,M11.1.0")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T10:00", "2026-12-01T15:00:00"),  # EST, UTC-5
        ("2026-07-01T10:00", "2026-07-01T14:00:00"),  # EDT, UTC-4: the date's own offset
        ("2026-12-01", "2026-12-01T05:00:00"),
        ("1201", "2026-12-01T05:00:00"),
        ("12/01-08:30", "2026-12-01T13:30:00"),
        ("07/01/26", "2026-07-01T04:00:00"),
        ("04:00", "2026-12-02T09:00:00"),  # 04:00 in New York, which at NOW is 05:00
        ("midnight", "2026-12-02T05:00:00"),
        ("2026-12-01T10:00+02:00", "2026-12-01T08:00:00"),  # an offset given wins
        ("2026-12-01T10:00Z", "2026-12-01T10:00:00"),
        ("now-1day", "2026-12-01T10:00:00"),  # relative times have no zone
        ("1764583200", "2025-12-01T10:00:00"),
    ],
)
def test_times_without_an_offset_are_local_as_sacct_reads_them(
    new_york: None, text: str, expected: str
) -> None:
    when = datetime.fromtimestamp(parse_time(text, NOW), UTC)
    assert when.strftime("%Y-%m-%dT%H:%M:%S") == expected


@pytest.mark.parametrize(
    "text", ["soon", "", "13/01", "25:00", "2026-13-01", "now-3parsecs", "1e3"]
)
def test_what_is_not_a_time_names_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match=r"^-S: not a time"):
        parse_time(text, NOW, "-S")


def test_history_and_replay_read_times_alike(every_state: float) -> None:
    assert ids(["history", "-S", "now-1day"]) == jobs_in("done", "failed", "cancelled")
    assert ids(["history", "-S", "now-1day", "-E", "now-2hours"]) == set()
    two_hours_ago = datetime.fromtimestamp(every_state - 7200).strftime("%Y-%m-%dT%H:%M")
    ended = jobs_in("done", "failed", "cancelled")
    assert ids(["history", "--since", two_hours_ago, "--until", "now+1hour"]) == ended
    window = runner.invoke(app, ["replay", "--since", "now-2hours", "--from", "now-1day"])
    assert window.exit_code == 2 and "either --since or --from" in window.stderr


@pytest.mark.parametrize(
    ("samples", "expected"),
    [("1e6", 1e6), ("10M", 1e7), ("2.5k", 2500), ("1000000", 1e6), ("5E6", 5e6), ("1.5b", 1.5e9)],
)
def test_samples_take_exponents_and_suffixes(
    tmp_path: Path, port: Any, samples: str, expected: float
) -> None:
    result = runner.invoke(app, ["submit", str(train_script(tmp_path)), "--samples", samples])
    assert result.exit_code == 0, result.output
    assert port.submitted[-1]["tag"].total_samples == expected


@pytest.mark.parametrize("samples", ["1.5", "0", "-3", "10x", "nan", "inf", "1e999", "k", ""])
def test_samples_that_are_no_count_are_one_line(tmp_path: Path, port: Any, samples: str) -> None:
    result = runner.invoke(app, ["submit", str(train_script(tmp_path)), "--samples", samples])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hops: --samples"), result.stderr
    assert port.submitted == []


def test_model_names_as_hubs_write_them(tmp_path: Path, port: Any) -> None:
    script = str(train_script(tmp_path))
    argv = ["submit", script, "--samples", "1M", "--model", "meta-llama/Llama-2-7b"]
    assert runner.invoke(app, argv).exit_code == 0
    tag = port.submitted[-1]["tag"]
    assert tag.model == "meta-llama/Llama-2-7b"
    assert decode(tag.encode()).model == "meta-llama/Llama-2-7b"  # what hopsd reads back


@pytest.mark.parametrize(
    "model", ["../etc", "/abs", "a/", "a//b", "a/b/c", "org/.hidden", "a b", "x;rm", "é", "x" * 65]
)
def test_hostile_model_names_stay_refused(tmp_path: Path, port: Any, model: str) -> None:
    argv = ["submit", str(train_script(tmp_path)), "--samples", "1M", "--model", model]
    result = runner.invoke(app, argv)
    assert result.exit_code == 2 and "model name" in result.stderr and port.submitted == []


def test_nodes_table_options(ledger: str, port: Any) -> None:
    parsable = runner.invoke(app, ["nodes", "--parsable", "-o", "node,type,gpus,alloc"])
    assert parsable.exit_code == 0, parsable.output
    lines = parsable.stdout.splitlines()
    assert lines[0] == "NODE|TYPE|GPUS|ALLOC" and "v100n1|v100|4|2" in lines
    bare = runner.invoke(app, ["nodes", "--noheader", "-o", "node,partitions"])
    assert "NODE" not in bare.stdout and ["k80n1", "k80,all"] in map(
        str.split, bare.stdout.splitlines()
    )
    plain = runner.invoke(app, ["nodes"]).stdout.splitlines()
    assert plain[0].split() == ["NODE", "TYPE", "STATE", "GPUS", "ALLOC", "SPEED", "FROM_JOBS"]


def test_fairness_table_options(ledger: str, port: Any) -> None:
    jobs = runner.invoke(app, ["fairness", "-P", "-o", "jobid,user,lr,starving"])
    assert jobs.exit_code == 0, jobs.output
    assert jobs.stdout.splitlines() == [
        "JOBID|USER|LR|STARVING",
        "101|alice|0.20|",
        "102|bob|4.50|STARVING",
    ]
    only_users = runner.invoke(app, ["fairness", "-n", "-P", "-o", "share,ratio,fair_share"])
    assert only_users.stdout.splitlines() == ["100.0%|2.00|50.0%", "0.0%|0.00|50.0%"]
    users = runner.invoke(app, ["fairness", "-P", "-o", "user,share"])  # USER is in both
    assert users.stdout.splitlines() == ["USER|SHARE", "alice|100.0%", "bob|0.0%"]
    full = runner.invoke(app, ["fairness"]).stdout
    assert "Jain's index (users)" in full and "FAIR_SHARE" in full
