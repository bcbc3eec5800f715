"""Fixtures of the daemon tests: a fresh ledger, a fake port, a config."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_fakeport import FakeClock, FakePort, small_cluster
from daemon_live import LiveEnv
from hops_conf import FAKE, merged, render
from live_users import ATTACKER, ensure_user

from hopsd.config import HopsConfig, parse_config


@pytest.fixture
def config(tmp_path: Path) -> HopsConfig:
    spool = tmp_path / "spool"
    spool.mkdir()
    # no checkpoint notice: moves requeue at once here (the notice has tests of its own)
    daemon = {"spool_dir": str(spool), "requeue_quiet_s": 0.0, "checkpoint_grace_s": 0.0}
    return parse_config(render(merged(FAKE, {"daemon": daemon})))


@pytest.fixture
def port() -> FakePort:
    return FakePort(small_cluster())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[LiveEnv]:
    """A live test's private ledger, spool and job-name prefix; its jobs cancelled after.

    A test module that needs a different one (shared users, a shorter grace)
    defines its own ``env``.
    """
    live = LiveEnv.create(tmp_path)
    yield live
    live.cleanup()


@pytest.fixture(scope="module")
def attacker() -> str:
    """The unprivileged user whose jobs attack hopsd (made on first use; live tests only)."""
    return ensure_user(ATTACKER)
