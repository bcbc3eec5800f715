"""Users read the ledger without any right to write it, as an unprivileged Unix user.

``hops status``, ``hops fairness`` and ``hops nodes`` run in a process of their
own under ``runuser -u``: on SQLite against a root-owned file of mode 0644 in
a root-owned directory (hopsd stopped, then a writer holding it open), and on
PostgreSQL through a role made by ``hops db grant-reader``, which must fail to
write. A CLI that wrote anything (SQLite's WAL pragma did) fails here.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import site
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_live import need_cluster_and_root, temp_dir
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.core.model import Configuration
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.records import JobSpec, JobState, JobUpdate, TagStatus, ThroughputLayer
from hopsd.ledger.unit import Ledger
from hopsd.slurm.cli_backend import CliSlurm

pytestmark = pytest.mark.slurm

READER = "hopsreader"
PG_ROLE = "hops_ro_test"
PG_URL = os.environ.get("HOPS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="module")
def reader() -> str:
    need_cluster_and_root("creating the test user")
    try:
        pwd.getpwnam(READER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", READER], check=True)
    return READER


def _boot() -> list[str]:
    """A Python the reader may run, with this environment's packages and the ``hops``
    console script's entry point (``status`` then takes the quick path, without typer)."""
    paths = [p for p in site.getsitepackages() if Path(p).is_dir()]
    code = (
        "import site, sys\n"
        f"for p in {paths!r}: site.addsitedir(p)\n"
        "sys.argv[0] = 'hops'\n"
        "from hops_cli.launch import run\n"
        "run()\n"
    )
    want = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for python in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        probe = ["-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
        got = subprocess.run(
            ["runuser", "-u", READER, "--", python, *probe], capture_output=True, text=True
        )
        if got.returncode == 0 and got.stdout.strip() == want:
            return [python, "-c", code]
    pytest.skip(f"no Python {want} the user {READER} may run (the venv's is under a private home)")


def hops_as_reader(conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/tmp",
        "HOPS_CONF": str(conf),
        "SLURM_CONF": os.environ["SLURM_CONF"],
    }
    return subprocess.run(
        ["runuser", "-u", READER, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
         *_boot(), *args],
        capture_output=True, text=True, timeout=120, cwd="/tmp",
    )  # fmt: skip


def two_nodes_of_a_type() -> tuple[str, str, str]:
    by_type: dict[str, list[str]] = {}
    for node in CliSlurm().list_nodes():
        if node.gpu_type and node.gpus_total > 0:
            by_type.setdefault(node.gpu_type, []).append(node.name)
    for gpu_type, names in sorted(by_type.items()):
        if len(names) >= 2:
            return gpu_type, names[0], names[1]
    pytest.skip("the test cluster has no two nodes of one GPU type")


def fill(ledger: Ledger, user: str) -> dict[str, Any]:
    """A running job (measured on two servers of its type), a waiting one, usage."""
    gpu_type, fast, slow = two_nodes_of_a_type()
    now = 1.0e9
    with ledger.unit() as unit:
        for job_id, slurm_id in (("r1", 9_100_001), ("w1", 9_100_002), ("d1", 9_100_003)):
            unit.add_job(
                JobSpec(job_id, user, (1, 2), 1.0e6, now - 600, 32, "acct", slurm_id,
                        tag_status=TagStatus.VALID, state=JobState.QUEUED),
                now - 600,
            )  # fmt: skip
        unit.transition("r1", JobState.RUNNING, now - 300, "running")
        unit.set_placement("r1", Configuration(gpu_type, ((fast, 1),)))
        unit.update_job(JobUpdate("w1", plan_reason="queued: position 1", latency_ratio=1.5))
        unit.transition("d1", JobState.RUNNING, now - 500, "running")
        unit.transition("d1", JobState.DONE, now - 100, "exit 0")
        store = unit.store(now)
        store.observe(ThroughputLayer.ENTITY_AGGREGATED, "r1", fast, 1, 200.0)
        store.observe(ThroughputLayer.ENTITY_AGGREGATED, "r1", slow, 1, 100.0)
        unit.add_usage(user, "acct", now - 3600, 3600.0, 7200.0)
    return {"fast": fast, "slow": slow, "ids": [9_100_001, 9_100_002]}


def check_reads(conf: Path, user: str, facts: dict[str, Any], running: bool = False) -> None:
    """status, show, history, fairness and nodes as the reader; hopsd running or stopped."""
    status = hops_as_reader(conf, "status", "--json")
    assert status.returncode == 0, status.stderr
    payload = json.loads(status.stdout)
    jobs = payload["jobs"]
    assert [j["job_id"] for j in jobs] == facts["ids"]
    assert payload["daemon"]["mode"] == ("running" if running else "stopped")
    expected = "queued: position 1" if running else "hopsd not running (last: queued: position 1)"
    assert jobs[1]["reason"] == expected
    table = hops_as_reader(conf, "status")
    assert table.returncode == 0 and ("hopsd is not running" in table.stdout) != running
    show = hops_as_reader(conf, "show", str(facts["ids"][1]), "--json")
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout)["queue_position"] == 1
    history = hops_as_reader(
        conf, "history", "--since", "2001-09-01", "--until", "2001-09-30", "--json"
    )
    assert history.returncode == 0, history.stderr
    finished = json.loads(history.stdout)["jobs"]
    assert [(j["job_id"], j["state"], j["jct_s"]) for j in finished] == [(9_100_003, "done", 500.0)]
    fairness = hops_as_reader(conf, "fairness", "--json")
    assert fairness.returncode == 0, fairness.stderr
    assert [u["user"] for u in json.loads(fairness.stdout)["users"]] == [user]
    nodes = hops_as_reader(conf, "nodes", "--json")
    assert nodes.returncode == 0, nodes.stderr
    factors = {n["node"]: n["speed_factor"] for n in json.loads(nodes.stdout)["nodes"]}
    assert factors[facts["fast"]] == 1.0 and factors[facts["slow"]] == 0.5


@pytest.fixture
def root_dir() -> Iterator[Path]:
    """A directory only root may write, as /var/lib/hops is."""
    with temp_dir("hops-ro-", 0o755) as where:
        yield where


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sqlite_ledger_read_only_by_the_user_with_hopsd_stopped_and_running(
    reader: str, root_dir: Path
) -> None:
    path = root_dir / "ledger.sqlite"
    upgrade(f"sqlite:///{path}")
    ledger = Ledger.open(f"sqlite:///{path}")
    facts = fill(ledger, reader)
    ledger.dispose()  # hopsd stopped: the WAL is checkpointed and its files removed
    path.chmod(0o644)
    conf = root_dir / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "sqlite:///{path}"\n')
    conf.chmod(0o644)
    before, files = _digest(path), sorted(p.name for p in root_dir.iterdir())
    assert files == ["hops.conf", "ledger.sqlite"]

    check_reads(conf, reader, facts)
    assert _digest(path) == before  # not one byte written
    assert sorted(p.name for p in root_dir.iterdir()) == files

    # hopsd running: it holds the lease, keeps the file open in WAL mode, a commit in its WAL
    writer = Ledger.open(f"sqlite:///{path}")
    with writer.unit() as unit:
        assert unit.acquire_lease("hopsd-test", 600.0, time.time(), "hopsd")
        unit.update_job(JobUpdate("w1", plan_reason="queued: position 1"))
        unit.update_job(JobUpdate("r1", plan_reason="running on its node"))
    try:
        assert (root_dir / "ledger.sqlite-wal").exists()
        check_reads(conf, reader, facts, running=True)
        status = hops_as_reader(conf, "status", "--json")
        assert json.loads(status.stdout)["jobs"][0]["reason"] == "running on its node"
    finally:
        writer.dispose()


@pytest.fixture
def pg_ledger() -> Iterator[str]:
    """A database of this test, migrated; dropped with the reader role at the end."""
    base = make_url(PG_URL)
    admin = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    name = f"hops_ro_test_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # no server: skip with the reason
        admin.dispose()
        pytest.skip(f"PostgreSQL unreachable at {PG_URL}: {exc}")
    url = base.set(database=name).render_as_string(hide_password=False)
    upgrade(url)
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'DROP ROLE IF EXISTS "{PG_ROLE}"'))
    admin.dispose()


@pytest.mark.postgres
def test_postgres_ledger_read_through_a_role_that_cannot_write(
    reader: str, pg_ledger: str, root_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger.open(pg_ledger)
    facts = fill(ledger, reader)
    ledger.dispose()
    admin_conf = root_dir / "hopsd.conf"
    admin_conf.write_text(f'[ledger]\nurl = "{pg_ledger}"\n')
    monkeypatch.setenv("HOPS_CONF", str(admin_conf))
    granted = CliRunner().invoke(app, ["db", "grant-reader", PG_ROLE, "--execute"])
    assert granted.exit_code == 0, granted.output

    read_url = make_url(pg_ledger).set(username=PG_ROLE).render_as_string(hide_password=False)
    conf = root_dir / "hops.conf"
    conf.write_text(f'[ledger]\nread_url = "{read_url}"\n')
    conf.chmod(0o644)
    check_reads(conf, reader, facts)

    # the read-only role cannot write, even when it asks for a writable transaction
    engine = create_engine(read_url)
    try:
        for opening in ("", "SET TRANSACTION READ WRITE"):
            with (
                pytest.raises(DBAPIError, match=r"read-only|permission denied"),
                engine.begin() as c,
            ):
                if opening:
                    c.execute(text(opening))
                c.execute(text("INSERT INTO daemon_lease (name, expires_at) VALUES ('x', 0)"))
    finally:
        engine.dispose()

    # without read_url the CLI reads through url, and says why that is a bad idea
    conf.write_text(f'[ledger]\nurl = "{read_url}"\n')
    warned = hops_as_reader(conf, "status", "--json")
    assert warned.returncode == 0 and "read_url is not set" in warned.stderr
