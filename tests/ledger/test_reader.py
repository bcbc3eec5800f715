"""The CLI's driver-only reader gives what the unit of work gives, and cannot write.

Run on SQLite and on PostgreSQL (see conftest): every record the status
document is built from is compared field by field (and type by type) with the
unit of work's on the same database, and the whole ``hops status`` document
built from either is the same.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from hopsd.config import HopsConfig
from hopsd.core.model import Configuration
from hopsd.ledger.errors import LedgerUnavailableError
from hopsd.ledger.reader import parse_target, reading, redacted
from hopsd.ledger.records import (
    Forecast,
    ForeseenLine,
    JobLine,
    JobSpec,
    JobState,
    JobUpdate,
    Prediction,
    RoundSummary,
)
from hopsd.ledger.unit import Ledger
from hopsd.views.filters import JobFilter
from hopsd.views.status import status_payload

NOW = 1_000_000.0


def _fill(url: str, make_spec: Callable[..., JobSpec]) -> None:
    """Jobs in every state, with placements, per-demand LRs, NULL-able fields; a lease,
    rounds and refusals."""
    ledger = Ledger.open(url)
    with ledger.unit() as unit:
        for k, state in enumerate(
            [JobState.QUEUED, JobState.RUNNING, JobState.RUNNING, JobState.DONE, JobState.FAILED]
        ):
            job = unit.add_job(
                make_spec(f"j{k}", user=f"u{k % 2}", slurm_job_id=100 + k, submit_time=NOW - k),
                NOW - 100 + k,
            )
            if state is JobState.QUEUED:
                unit.transition(job.id, JobState.QUEUED, NOW - 90, "queued: position 1")
                continue
            unit.transition(job.id, JobState.QUEUED, NOW - 90)
            unit.transition(job.id, JobState.RUNNING, NOW - 80)
            unit.set_placement(job.id, Configuration.of("a100", {"a100n1": 2, "a100n2": 2}))
            unit.update_job(
                JobUpdate(job.id, latency_ratio=1.25 + k, ftf_rho=0.5, plan_reason="why")
            )
            if state is not JobState.RUNNING:
                unit.transition(job.id, state, NOW - 10 + k)
        unit.acquire_lease("head1:42", 600.0, NOW - 5, "hopsd")
        unit.record_round(RoundSummary(number=1, started_at=NOW - 30, policy="hops"))
        unit.record_round(RoundSummary(number=1, started_at=NOW - 20, shadow=True))
        unit.record_refusal(7, "u0", "below one batch", NOW - 50)
        unit.record_refusal(8, "u1", "no type holds 64 GPUs", NOW - 40)
        unit.record_predictions(
            [
                Prediction("j0", NOW - 60, "queued", NOW + 120.0, NOW + 720.0),
                Prediction("j1", NOW - 60, "running", None, NOW + 300.0),
                Prediction("j0", NOW - 30, "queued", NOW + 60.0, NOW + 660.0),
            ]
        )
    ledger.dispose()


@pytest.fixture
def filled(migrated_url: str, engine: Engine, make_spec: Callable[..., JobSpec]) -> str:
    _fill(migrated_url, make_spec)
    return migrated_url


def _typed(value: Any) -> Any:
    """Values with their types: ``JobState.RUNNING`` must not pass for ``"running"``."""
    return (type(value).__name__, value.__dict__ if hasattr(value, "__dict__") else value)


def _lines(foreseen: list[ForeseenLine]) -> list[tuple[Any, ...]]:
    """Lines, typed field by field, each with its forecast: the unit of work's records cut
    to their lines' fields."""
    fields = JobLine.__dataclass_fields__
    return [(*(_typed(getattr(line, f)) for f in fields), said) for line, said in foreseen]


def test_reader_records_equal_the_unit_of_works(filled: str) -> None:
    ledger = Ledger.open(filled, read_only=True)
    every = list(JobState)
    picks = (every, [JobState.RUNNING], [JobState.CANCELLED])
    with ledger.reading() as unit, reading(filled) as reader:
        assert reader.at_head()
        lines = [(_lines(reader.job_lines(s)), _lines(unit.job_lines(s))) for s in picks]
        assert [len(mine) for mine, _ in lines] == [5, 2, 0]
        pairs = [
            *lines,
            (reader.finished_latency_ratios(NOW - 100), unit.finished_latency_ratios(NOW - 100)),
            (reader.lease_info(), unit.lease_info()),
            (reader.latest_round(), unit.latest_round()),
            (reader.refusals(), unit.refusals()),
            (reader.refusals(["u1"]), unit.refusals(["u1"])),
            (reader.refusals([]), unit.refusals([])),
        ]
        foreseen = reader.job_lines(every)
    ledger.dispose()
    for mine, theirs in pairs:
        assert mine == theirs
        many = mine if isinstance(mine, list) else [mine]
        assert [_typed(v) for v in many] == [
            _typed(v) for v in (theirs if isinstance(theirs, list) else [theirs])
        ]
    assert {type(j.state) for j, _ in foreseen} == {JobState}
    by_id = {j.id: (j, said) for j, said in foreseen}
    assert by_id["j1"][0].current_parts == (("a100n1", 2), ("a100n2", 2))
    assert by_id["j0"][0].current_parts is None and by_id["j3"][0].state is JobState.DONE
    # each line with its newest forecast, none for a job never forecast
    assert by_id["j0"][1] == Forecast(NOW + 60.0, NOW + 660.0)
    assert by_id["j1"][1] == Forecast(None, NOW + 300.0) and by_id["j2"][1] is None
    assert pairs[4][0] is not None and pairs[4][0].holder == "head1:42"
    assert pairs[5][0] is not None and pairs[5][0].shadow


def test_filtered_reads_keep_what_the_filter_names_on_either(filled: str) -> None:
    """Users and job ids filter in the database; a list too long to send is filtered
    after the read; an empty list keeps nothing; the queue's entries are the waiting ones."""
    ledger = Ledger.open(filled, read_only=True)
    every = list(JobState)
    # beyond what either database takes in one statement (SQLite 32,766, PostgreSQL 65,535)
    many_ids = [101, 103, *range(5000, 5000 + 70_000)]
    with ledger.reading() as unit, reading(filled) as reader:
        for source in (reader, unit):
            # oldest submission first: j4 came before j3, j2, j1
            assert [j.id for j, _ in source.job_lines(every, users=["u1"])] == ["j3", "j1"]
            assert [j.id for j, _ in source.job_lines(every, slurm_ids=[102, 104])] == [
                "j4",
                "j2",
            ]
            assert [j.id for j, _ in source.job_lines(every, ["u0"], [102, 101])] == ["j2"]
            assert [j.id for j, _ in source.job_lines(every, slurm_ids=many_ids)] == [
                "j3",
                "j1",
            ]
            assert source.job_lines(every, users=[]) == []
            assert source.job_lines([JobState.DONE], users=["u1"])[0][0].id == "j3"
        assert reader.queue_entries() == unit.queue_entries()
        (entry,) = reader.queue_entries()
        assert (entry.id, entry.state, entry.submit_time) == ("j0", JobState.QUEUED, NOW)
    ledger.dispose()


def test_status_document_is_the_same_from_either(
    filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hopsd.views.status.time.time", lambda: NOW)
    monkeypatch.setattr("hopsd.views.status.read_nodes", lambda config: ([], None))
    config = HopsConfig()
    ledger = Ledger.open(filled, read_only=True)
    with ledger.reading() as unit, reading(filled) as reader:
        for wanted in (
            None,
            JobFilter(users=frozenset({"u1"})),
            JobFilter(states=frozenset({"done"})),
            JobFilter(job_ids=frozenset({100, 101}), users=frozenset({"u0"})),
        ):
            assert status_payload(reader, config, wanted, 24.0) == status_payload(
                unit, config, wanted, 24.0
            )
    ledger.dispose()


def test_reader_cannot_write(filled: str) -> None:
    with reading(filled) as reader:
        conn = reader._conn  # the driver connection itself: what an attacker in-process gets
        with pytest.raises(Exception, match=r"(?i)read-only|readonly"):
            conn.execute("DELETE FROM jobs")
    with reading(filled) as reader:
        assert len(reader.job_lines(list(JobState))) == 5


def test_reader_of_an_empty_database_is_not_at_head(empty_url: str) -> None:
    if empty_url.startswith("sqlite"):
        sqlite3.connect(parse_target(empty_url).path).close()
    with reading(empty_url) as reader:
        assert not reader.at_head()


def test_unreachable_server_is_a_ledger_error() -> None:
    url = "postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=2"
    with pytest.raises(LedgerUnavailableError, match="check the ledger URL"), reading(url):
        pass


def test_urls_are_parsed_like_the_engine_reads_them(tmp_path: Any) -> None:
    assert parse_target(f"sqlite:///{tmp_path}/l.db").path == f"{tmp_path}/l.db"
    assert parse_target("sqlite:///rel.db").path == "rel.db"
    pg = dict(
        parse_target(
            "postgresql+psycopg://hops%40x:p%2Fw@db:5433/led?options=-csearch_path%3Ds1"
        ).connect
    )
    assert pg == {
        "host": "db",
        "port": "5433",
        "user": "hops@x",
        "password": "p/w",
        "dbname": "led",
        "options": "-csearch_path=s1",
    }
    assert redacted("postgresql://u:secret@h/d") == "postgresql://u:***@h/d"
    with pytest.raises(LedgerUnavailableError, match="unsupported"):
        parse_target("mysql://u@h/d")


def test_reader_imports_no_sqlalchemy() -> None:
    code = (
        "import sys, hopsd.ledger.reader, hopsd.views.status, hops_cli.quick, "
        "hops_cli.status_report, hops_cli.ledger_access; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sqlalchemy', 'typer', 'pydantic', 'click', 'alembic', 'rich')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_users_status_numbers_the_whole_queue_whether_or_not_it_is_all_theirs(
    migrated_url: str, make_spec: Callable[..., JobSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queue positions count every waiting job: a user's status that holds the whole
    queue takes them from its own lines, one that does not reads the queue."""
    monkeypatch.setattr("hopsd.views.status.time.time", lambda: NOW)
    monkeypatch.setattr("hopsd.views.status.read_nodes", lambda config: ([], None))
    ledger = Ledger.open(migrated_url)
    with ledger.unit() as unit:
        for k, (user, lr) in enumerate([("u0", 2.0), ("u1", 5.0), ("u0", 1.0)]):
            job = unit.add_job(make_spec(f"q{k}", user=user, slurm_job_id=200 + k), NOW - 50 + k)
            unit.transition(job.id, JobState.QUEUED, NOW - 40)
            unit.update_job(JobUpdate(job.id, latency_ratio=lr))
    ledger.dispose()
    ledger = Ledger.open(migrated_url, read_only=True)
    config = HopsConfig()

    def positions(source: Any, users: set[str]) -> dict[int, int]:
        document = status_payload(source, config, JobFilter(users=frozenset(users)), 24.0)
        return {j["job_id"]: j["queue_position"] for j in document["jobs"]}

    with ledger.reading() as unit, reading(migrated_url) as reader:
        for source in (reader, unit):
            assert positions(source, {"u0"}) == {200: 2, 202: 3}  # u1's job is served first
            assert positions(source, {"u1"}) == {201: 1}
            assert positions(source, {"u0", "u1"}) == {200: 2, 201: 1, 202: 3}
    ledger.dispose()
