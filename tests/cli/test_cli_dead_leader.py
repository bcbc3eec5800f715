"""``hops status`` names a leader only while one can be leading."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import time
from typing import Any

from sqlalchemy import update
from typer.testing import CliRunner

from hops_cli.main import app
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.lease import ensure_lease
from hopsd.ledger.models import LeaseRow

runner = CliRunner()


def _gone_pid() -> int:
    dead = subprocess.Popen(["true"])
    dead.wait()
    return dead.pid


def _status(ledger: str) -> dict[str, Any]:
    result = runner.invoke(app, ["status", "--all", "--json"])
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def test_a_killed_local_hopsd_is_not_named_leader(ledger: str, port: Any) -> None:
    holder = f"{socket.gethostname()}:{_gone_pid()}"
    engine = make_engine(ledger)
    with make_sessionmaker(engine).begin() as s:
        ensure_lease(s, holder, 600.0, time.time())
    engine.dispose()
    payload = _status(ledger)
    assert payload["leader"]["holder"] is None and payload["daemon"]["mode"] == "stopped"
    table = runner.invoke(app, ["status", "--all"])
    assert holder not in table.stdout.split("leader:", 1)[-1].splitlines()[0]


def test_an_infinite_lease_is_not_believed_past_the_longest_ttl(ledger: str, port: Any) -> None:
    engine = make_engine(ledger)
    with make_sessionmaker(engine).begin() as s:
        ensure_lease(s, "otherhost:4242", 60.0, time.time() - 2 * 3600)
        s.execute(update(LeaseRow).values(expires_at=math.inf))
    engine.dispose()
    payload = _status(ledger)
    assert payload["leader"]["holder"] is None and payload["daemon"]["mode"] == "stopped"
    assert math.isfinite(payload["leader"]["expires_at"])
