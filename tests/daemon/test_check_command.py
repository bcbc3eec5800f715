"""``hopsd --check`` on a temporary hops.conf and SQLite ledger: one line per check, the
exit status scripts rely on, the failures an admin meets first (a spool others may write,
a ledger never migrated), and no lease taken nor anything created."""

from __future__ import annotations

import http.server
import json
import socket
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hopsd.config import HopsConfig
from hopsd.daemon import main as hopsd_main
from hopsd.daemon.check import CheckResult, main_check, run_checks
from hopsd.ledger import migrate
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.lease import lease_info
from hopsd.slurm.errors import SlurmUnavailableError
from hopsd.slurm.port import SlurmNode

NODES = [
    SlurmNode("a100n1", ("hops",), "a100", 4, 0, "IDLE"),
    SlurmNode("v100n1", ("hops",), "v100", 4, 2, "MIXED"),
    SlurmNode("login", ("debug",), None, 0, 0, "IDLE"),
]


class FakePort:
    """Answers the one call ``--check`` makes of Slurm, or fails it like a dead slurmctld."""

    def __init__(self, name: str, nodes: list[SlurmNode] | None) -> None:
        self.name = name
        self.nodes = nodes

    def list_nodes(self) -> list[SlurmNode]:
        if self.nodes is None:
            raise SlurmUnavailableError("`sinfo --json`: Unable to contact slurm controller")
        return list(self.nodes)


def fake_ports(nodes: list[SlurmNode] | None = NODES, asked: list[str] | None = None) -> Any:
    def make(backend: str, _config: HopsConfig) -> FakePort:
        if asked is not None:
            asked.append(backend)
        return FakePort(backend, nodes)

    return make


def write_conf(tmp_path: Path, *, spool: str | None = None, extra: str = "") -> Path:
    """A hops.conf with a ledger, spool and metrics address of the test's own."""
    spool = str(tmp_path / "spool") if spool is None else spool
    path = tmp_path / "hops.conf"
    path.write_text(
        f'[ledger]\nurl = "sqlite:///{tmp_path / "ledger.sqlite"}"\n'
        f'[slurm]\npartitions = ["hops"]\n{extra}'
        f'[daemon]\nspool_dir = "{spool}"\n'
        '[metrics]\naddress = "127.0.0.1:0"\n'
    )
    return path


@pytest.fixture
def ready(tmp_path: Path) -> Path:
    """Everything hopsd needs: a migrated ledger and a spool only hopsd's user may write."""
    migrate.upgrade(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    (tmp_path / "spool").mkdir(mode=0o755)
    (tmp_path / "spool").chmod(0o755)
    return write_conf(tmp_path)


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


def test_all_checks_pass_and_hopsd_does_not_lead(
    ready: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main_check(str(ready), False, fake_ports()) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["ok", "config"],
        ["ok", "slurm"],
        ["ok", "ledger"],
        ["ok", "spool"],
        ["ok", "metrics"],
    ]
    assert "8 GPUs on 2 managed nodes" in lines[1]
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    with make_sessionmaker(engine)() as session:
        assert lease_info(session) is None  # no lease taken: a live hopsd keeps leading
    engine.dispose()


def test_a_spool_others_may_write_fails_with_hopsds_own_reason(ready: Path, tmp_path: Path) -> None:
    (tmp_path / "spool").chmod(0o777)
    spool = by_name(run_checks(str(ready), fake_ports()))["spool"]
    assert not spool.ok
    assert "writable by other users (mode 777)" in spool.detail  # spool.check_root's words
    assert spool.fix


def test_a_missing_spool_is_fine_when_hopsd_can_make_it_and_is_not_made(tmp_path: Path) -> None:
    migrate.upgrade(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    conf = write_conf(tmp_path, spool=str(tmp_path / "new" / "spool"))
    spool = by_name(run_checks(str(conf), fake_ports()))["spool"]
    assert spool.ok and "will create" in spool.detail
    assert not (tmp_path / "new").exists()


def test_an_unmigrated_ledger_fails_naming_hops_db_upgrade(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sqlite3.connect(tmp_path / "ledger.sqlite").close()  # exists, holds no schema
    (tmp_path / "spool").mkdir(mode=0o755)
    assert main_check(str(write_conf(tmp_path)), False, fake_ports()) == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if " ledger " in x)
    assert line.startswith("FAIL")
    assert "empty (no schema)" in line and "hops db upgrade" in line


def test_a_missing_ledger_fails_and_is_not_created(tmp_path: Path) -> None:
    ledger = by_name(run_checks(str(write_conf(tmp_path)), fake_ports()))["ledger"]
    assert not ledger.ok and "no ledger at" in ledger.detail and "hops db upgrade" in ledger.fix
    assert not (tmp_path / "ledger.sqlite").exists()


def test_an_invalid_config_is_the_only_line(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, extra="timeout_s = -1\n")
    results = run_checks(str(conf), fake_ports())
    assert [(r.name, r.ok) for r in results] == [("config", False)]
    assert "slurm.timeout_s" in results[0].detail


def test_slurm_unreachable_or_without_the_partitions(ready: Path) -> None:
    dead = by_name(run_checks(str(ready), fake_ports(None)))["slurm"]
    assert not dead.ok and "Unable to contact" in dead.detail and "slurmctld" in dead.fix
    ready.write_text(ready.read_text().replace('["hops"]', '["gpu"]'))
    wrong = by_name(run_checks(str(ready), fake_ports()))["slurm"]
    assert not wrong.ok and "partition gpu not in Slurm (it has debug,hops)" in wrong.detail


def test_the_rest_backend_is_checked_beside_the_commands(ready: Path, tmp_path: Path) -> None:
    token = tmp_path / "jwt"
    token.write_text("SLURM_JWT=x\n")
    text = ready.read_text().replace(
        'partitions = ["hops"]\n',
        f'partitions = ["hops"]\nbackend = "rest"\nrest_url = "http://127.0.0.1:1"\n'
        f'rest_token_file = "{token}"\n',
    )
    ready.write_text(text)
    asked: list[str] = []
    names = [r.name for r in run_checks(str(ready), fake_ports(asked=asked))]
    assert names == ["config", "slurm", "slurmrestd", "ledger", "spool", "metrics"]
    assert asked == ["cli", "rest"]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something other than hopsd listens on (and answers no /healthz)."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


def test_a_port_taken_by_another_program_fails(ready: Path, busy_port: int) -> None:
    ready.write_text(ready.read_text().replace("127.0.0.1:0", f"127.0.0.1:{busy_port}"))
    metrics = by_name(run_checks(str(ready), fake_ports()))["metrics"]
    assert (
        not metrics.ok and "cannot listen" in metrics.detail and "[metrics] address" in metrics.fix
    )


class _Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"status": "ok"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


def test_a_port_a_hopsd_already_serves_passes(ready: Path) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        ready.write_text(ready.read_text().replace("127.0.0.1:0", f"127.0.0.1:{port}"))
        metrics = by_name(run_checks(str(ready), fake_ports()))["metrics"]
    finally:
        server.shutdown()
        server.server_close()
    assert metrics.ok and "already served by a hopsd" in metrics.detail


def test_json_for_scripts_through_hopsds_own_arguments(
    ready: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("hopsd.slurm.factory.make_port", lambda *a, **k: FakePort("cli", NODES))
    (tmp_path / "spool").chmod(0o775)
    assert hopsd_main.main(["--check", "--json", "--config", str(ready)]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is False
    checks = {c["name"]: c for c in document["checks"]}
    assert set(checks) == {"config", "slurm", "ledger", "spool", "metrics"}
    assert checks["ledger"]["ok"] and not checks["spool"]["ok"]
    assert set(checks["spool"]) == {"name", "ok", "detail", "fix"}


@pytest.mark.parametrize("argv", [["--json"], ["--check", "--once"], ["--check", "db", "upgrade"]])
def test_check_options_that_do_not_go_together_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        hopsd_main.parse_args(argv)
    assert stopped.value.code == 2


def test_an_unusable_pyslurm_is_a_note_since_hopsd_falls_back(ready: Path) -> None:
    from hopsd.slurm.factory import pyslurm_unavailable_reason

    if pyslurm_unavailable_reason() is None:
        pytest.skip("pyslurm imports here")
    ready.write_text(ready.read_text().replace("[slurm]\n", '[slurm]\nbackend = "pyslurm"\n'))
    note = by_name(run_checks(str(ready), fake_ports()))["pyslurm"]
    assert note.ok and "uses the CLI backend" in note.detail
