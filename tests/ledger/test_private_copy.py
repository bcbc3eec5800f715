"""The copies users read of a private SQLite ledger: what each may see, and nothing more.

Slurm's ``PrivateData`` rules (``jobs``, ``usage``, ``accounts``) trim the copy;
a trusted viewer's copy is the whole ledger. Removed rows must not survive in
the file's free pages: a user holds the copy's bytes, not only its tables.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from hopsd.core.privacy import PrivateData, Viewer
from hopsd.daemon.readservice import ReadService
from hopsd.ledger.errors import LedgerUnavailableError
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.private_copy import TABLES, copy_for, fetch_copy, make_private
from hopsd.ledger.records import JobSpec, JobState, TagStatus
from hopsd.ledger.unit import Ledger
from hopsd.slurm.privacy import SlurmPrivacy, parse_admins, parse_config

ALL = PrivateData(jobs=True, usage=True, accounts=True)


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite"
    upgrade(f"sqlite:///{path}")
    opened = Ledger.open(f"sqlite:///{path}")
    with opened.unit() as unit:
        for k, user in enumerate(("alice", "bob")):
            spec = JobSpec(f"j{k}", user, (1,), 1e6, 100.0, 32, f"acct_{user}", 500 + k,
                           model_name=f"model_of_{user}", tag_status=TagStatus.VALID,
                           state=JobState.QUEUED)  # fmt: skip
            unit.add_job(spec, 100.0)
            unit.add_usage(user, f"acct_{user}", 0.0, 3600.0, 7200.0)
            unit.add_usage(user, f"other_{user}", 0.0, 60.0, 60.0)
    opened.dispose()
    return path


def _open(fd: int) -> tuple[sqlite3.Connection, bytes]:
    data = os.pread(fd, 1 << 24, 0)
    os.close(fd)
    conn = sqlite3.connect(":memory:")
    conn.deserialize(data)
    return conn, data


def test_the_ledger_is_made_private_from_its_creation(ledger: Path) -> None:
    assert ledger.stat().st_mode & 0o777 == 0o600
    ledger.chmod(0o644)
    assert make_private(ledger) == ["ledger.sqlite"]
    assert ledger.stat().st_mode & 0o777 == 0o600


def test_a_user_copy_holds_only_their_jobs_usage_and_accounts(ledger: Path) -> None:
    conn, data = _open(copy_for(ledger, Viewer("alice"), ALL))
    assert conn.execute('SELECT "user", model_name FROM jobs').fetchall() == [
        ("alice", "model_of_alice")
    ]
    assert {r[0] for r in conn.execute('SELECT "user" FROM usage')} == {"alice"}
    for secret in (b"bob", b"model_of_bob", b"acct_bob", b"other_bob"):
        assert secret not in data


def test_accounts_alone_blank_other_users_accounts_and_sum_their_usage(ledger: Path) -> None:
    conn, data = _open(copy_for(ledger, Viewer("alice"), PrivateData(accounts=True)))
    assert conn.execute('SELECT "user", account FROM jobs ORDER BY id').fetchall() == [
        ("alice", "acct_alice"),
        ("bob", ""),
    ]
    rows = conn.execute("SELECT account, gpu_s FROM usage WHERE \"user\" = 'bob'").fetchall()
    assert rows == [("", 3660.0)]
    assert b"acct_bob" not in data and b"other_bob" not in data


def test_trusted_viewers_and_no_rules_get_the_whole_ledger(ledger: Path) -> None:
    for fd in (copy_for(ledger, Viewer("root", True), ALL), copy_for(ledger, Viewer("alice"),
               PrivateData())):  # fmt: skip
        conn, _ = _open(fd)
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (2,)


def test_the_service_answers_with_a_copy_and_hopsd_down_is_said_plainly(ledger: Path) -> None:
    service = ReadService(ledger, lambda: SlurmPrivacy(ALL))
    service.start()
    try:
        stored = fetch_copy(ledger, os.geteuid())
        again = fetch_copy(ledger, os.geteuid())
        conn = sqlite3.connect(f"file:{stored}?mode=ro", uri=True)
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (2,)  # root is trusted
        assert stored.read_bytes() == again.read_bytes()
        # the service counts an answer once it is sent: the caller may be faster
        deadline = time.monotonic() + 5.0
        while service.served < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert service.served == 2
        with socket.socket(socket.AF_UNIX) as stalled:  # a client that never asks
            stalled.connect(str(service.path))
            assert fetch_copy(ledger, os.geteuid()).exists()
        stored.unlink()
        again.unlink()
    finally:
        service.close()
    with pytest.raises(LedgerUnavailableError, match="is hopsd running"):
        fetch_copy(ledger, os.geteuid())


def test_slurm_privacy_is_parsed_from_the_controllers_own_output() -> None:
    config = "PriorityType            = priority/basic\nPrivateData             = accounts,jobs,usage\nSlurmUser               = slurm(64030)\n"  # noqa: E501
    assert parse_config(config) == (ALL, "slurm")
    assert parse_config("PrivateData             = none\n")[0] == PrivateData()
    assert parse_admins("root|Administrator\nalice|None\nop|Operator\n") == {"root", "op"}


def test_every_ledger_table_has_a_privacy_rule(ledger: Path) -> None:
    conn = sqlite3.connect(ledger)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {n for n in names if not n.startswith("sqlite_")} == set(TABLES)
