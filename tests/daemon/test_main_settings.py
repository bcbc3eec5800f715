"""hopsd refuses settings it cannot honour in one line and exit 2, and starts over what an
older hopsd with a bad configuration left in the ledger."""

from __future__ import annotations

import math
import socket
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import update

from hopsd.daemon import main as hopsd_main
from hopsd.ledger import migrate
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.lease import ensure_lease, lease_info
from hopsd.ledger.models import LeaseRow


def _conf(tmp_path: Path, address: str = "", url: str | None = None) -> Path:
    path = tmp_path / "hops.conf"
    url = url or f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    path.write_text(f'[ledger]\nurl = "{url}"\n[metrics]\naddress = "{address}"\n')
    return path


def _one_line(err: str, *words: str) -> None:
    lines = [line for line in err.splitlines() if line.startswith("hopsd: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err and all(w in lines[0] for w in words), err


@pytest.mark.parametrize("address", ["127.0.0.1:notaport", "127.0.0.1:99999"])
def test_a_bad_metrics_address_is_one_line_and_exit_2(tmp_path, capsys, address):
    assert hopsd_main.main(["--config", str(_conf(tmp_path, address)), "--once"]) == 2
    _one_line(capsys.readouterr().err, "metrics.address", "port")


def test_a_port_in_use_is_one_line_and_exit_2_holding_no_lease(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    migrate.upgrade(url)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        assert hopsd_main.main(["--config", str(_conf(tmp_path, address)), "--once"]) == 2
    _one_line(capsys.readouterr().err, f"metrics.address {address}: cannot listen")
    with make_sessionmaker(make_engine(url)).begin() as s:
        info = lease_info(s)
        assert info is None or info.holder is None


def test_a_ledger_url_that_is_no_url_creates_no_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert hopsd_main.main(["--config", str(_conf(tmp_path, url="notaurl")), "--once"]) == 2
    _one_line(capsys.readouterr().err, "ledger.url", "notaurl")
    assert not (tmp_path / "notaurl").exists()


def test_an_infinite_lease_of_a_killed_hopsd_is_taken_over(tmp_path, capsys):
    """An older hopsd with ``lease_ttl_s = inf`` was SIGKILLed: its row says Inf."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    migrate.upgrade(url)
    dead = subprocess.Popen(["true"])
    dead.wait()
    holder = f"{socket.gethostname()}:{dead.pid}"
    sessions = make_sessionmaker(make_engine(url))
    with sessions.begin() as s:
        ensure_lease(s, holder, 60.0, time.time())
        s.execute(update(LeaseRow).values(expires_at=math.inf))
    assert hopsd_main.main(["--config", str(_conf(tmp_path)), "--once"]) == 0
    err = capsys.readouterr().err
    assert "OverflowError" not in err and f"event=lease-takeover holder={holder}" in err
    with sessions.begin() as s:
        info = lease_info(s)
        assert info is not None and info.holder is None and math.isfinite(info.expires_at)
