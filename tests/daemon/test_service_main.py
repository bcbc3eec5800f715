"""The service loop (back-off, loops, fair share through the tick) and the hopsd entry point."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hopsd.config import load_config
from hopsd.daemon import main as hopsd_main
from hopsd.daemon.service import Service
from hopsd.daemon.tick import Tick
from hopsd.ledger import migrate
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.lease import ensure_lease
from hopsd.ledger.usage import add_usage
from hopsd.slurm.tag import HopsTag


def test_slurm_down_backs_off_with_growing_skips_and_recovers(config, port, sessions, clock):
    service = Service(Tick(config, port, sessions, clock=clock))
    job = port.add_job(HopsTag((1,), 10_000))
    port.down = True
    attempts = []
    for _ in range(8):
        before = service.failures
        service.run_once()
        attempts.append(service.failures > before)
    # tries, skips 1, tries, skips 2, tries, skips 4...
    assert attempts == [True, False, True, False, False, True, False, False]
    assert service.skip == 2  # 4 to skip after the third failure, 2 already skipped
    port.down = False
    while service.skip:
        assert service.run_once() is None
    assert service.run_once() is not None
    assert service.failures == 0
    assert port.jobs[job].state == "RUNNING"  # nothing lost


def test_an_exception_in_a_tick_is_logged_and_the_loop_goes_on(config, port, sessions, clock):
    service = Service(Tick(config, port, sessions, clock=clock))
    port.list_nodes = None  # type: ignore[assignment,method-assign]
    assert service.run_once() is None
    assert service.metrics.tick_errors._value.get() == 1  # type: ignore[attr-defined]


def test_start_runs_the_requested_number_of_ticks(config, port, sessions, clock):
    fast = dataclasses.replace(config, queue_refresh_s=0.05)
    service = Service(Tick(fast, port, sessions, clock=clock))
    service.start(loops=3, install_signals=False)
    assert service.ticks == 3


@pytest.mark.parametrize("priority", ["lr", "las", "sjf"])
def test_fair_share_weight_lets_the_light_user_go_first(config, port, sessions, clock, priority):
    # The owner's factor scales the biased priority, so it works for any priority;
    # LAS and SJF do not depend on the wait, where the old wait scaling did nothing.
    def run(weight: float) -> str:
        for job in list(port.jobs):
            port.jobs.pop(job)
        everything = {"fast1": 4, "fast2": 4, "slow1": 4, "slow2": 4}
        blocker = port.add_job(None, held=False, running_on=everything)
        heavy = port.add_job(HopsTag((8,), 1e6), user="alice")
        light = port.add_job(HopsTag((8,), 1e6), user="bob")
        with sessions.begin() as s:
            add_usage(s, "alice", "acct", clock(), 5000.0, 5000.0)
        cfg = dataclasses.replace(config, fairshare_weight=weight, priority=priority)
        tick = Tick(cfg, port, sessions, clock=clock)
        tick.run_once()  # adopted; nothing fits, so both wait equally long
        clock.advance(5)
        port.finish(blocker)
        port.add_job(None, held=False, running_on={"fast1": 4, "fast2": 4})
        tick.run_once()  # 8 slow GPUs free: room for one of the two
        started = [j for j in (heavy, light) if port.jobs[j].state == "RUNNING"]
        assert len(started) == 1
        return "alice" if started[0] == heavy else "bob"

    assert run(0.0) == "alice"  # pure LR: a tie, broken by submission order
    assert run(1.0) == "bob"


def _conf(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "hops.conf"
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    path.write_text(f'[ledger]\nurl = "{url}"\n[metrics]\naddress = ""\n{extra}')
    return path


def test_bad_config_exits_2_naming_the_key(tmp_path, capsys):
    path = _conf(tmp_path, "[scheduler]\nround_length_s = -3\n")
    assert hopsd_main.main(["--config", str(path), "--once"]) == 2
    assert "scheduler.round_length_s" in capsys.readouterr().err


def test_outdated_schema_refuses_and_names_the_upgrade_command(tmp_path, capsys):
    path = _conf(tmp_path)
    assert hopsd_main.main(["--config", str(path), "--once"]) == 3
    assert "hopsd db upgrade" in capsys.readouterr().err
    assert hopsd_main.main(["--config", str(path), "db", "upgrade"]) == 0


def _leased_elsewhere(tmp_path: Path) -> Path:
    """A configuration whose upgraded ledger's lease another host holds; its path."""
    path = _conf(tmp_path)
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    migrate.upgrade(url)
    sessions = make_sessionmaker(make_engine(url))
    import time

    with sessions.begin() as s:
        ensure_lease(s, "otherhost:4242", 600.0, time.time())
    return path


def test_second_daemon_exits_naming_the_lease_holder(tmp_path, capsys):
    path = _leased_elsewhere(tmp_path)
    assert hopsd_main.main(["--config", str(path), "--once"]) == 4
    assert "otherhost:4242" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["debug", "Debug", "DEBUG", "warning"])
def test_log_level_is_accepted_in_any_case(given):
    assert hopsd_main.parse_args(["--log-level", given]).log_level == given.upper()


def test_unknown_log_level_is_a_usage_error():
    with pytest.raises(SystemExit) as exc:
        hopsd_main.parse_args(["--log-level", "loud"])
    assert exc.value.code == 2


def test_unknown_command_is_a_usage_error():
    with pytest.raises(SystemExit) as exc:
        hopsd_main.parse_args(["db", "downgrade"])
    assert exc.value.code == 2


def test_sighup_reload_keeps_the_old_config_when_the_new_one_is_invalid(config, port, sessions):
    from hopsd.config import ConfigError

    def bad() -> object:
        raise ConfigError("scheduler.sigma: must be > 0, got -1")

    service = Service(Tick(config, port, sessions), reload=bad)  # type: ignore[arg-type]
    service.reload()
    assert service.tick.config is config
    newer = dataclasses.replace(config, queue_refresh_s=7.0, lam=2.0)
    service.reload_config = lambda: newer
    service.reload()
    assert service.interval_s == 7.0 and service.tick.settings.lam == 2.0


def test_metrics_endpoint_serves_tick_figures(config, port, sessions, clock):
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    service = Service(Tick(config, port, sessions, clock=clock))
    port.add_job(HopsTag((1,), 10_000))
    service.run_once()
    service.metrics.serve(f"127.0.0.1:{free}")
    body = urllib.request.urlopen(f"http://127.0.0.1:{free}/metrics", timeout=5).read().decode()
    assert "hopsd_tick_seconds_count 1.0" in body
    assert 'hopsd_slurm_actions_total{action="release",result="ok"} 1.0' in body
    assert 'hopsd_enactments_total{kind="start",result="ok"} 1.0' in body
    assert "hopsd_jobs_adopted_total 1.0" in body
    assert service.metrics.endpoint is not None
    service.metrics.endpoint.close()
    service.metrics.serve("")  # disabled: nothing started, no error


def test_test_cluster_hops_conf_template_is_a_valid_config(tmp_path):
    from hopsd.config import parse_config

    template = Path(__file__).resolve().parents[2] / "docker" / "conf" / "hops.conf.in"
    text = template.read_text().replace("@CLUSTER_DIR@", str(tmp_path))
    config = parse_config(text)
    assert config.partitions == ("k80", "v100", "a100")
    assert config.ledger_url.endswith(f"{tmp_path}/hops-ledger.sqlite")
    assert config.gpu_type("a100").speed == 4.0
    assert "@" not in text


def test_lease_of_a_dead_local_daemon_is_taken_over(tmp_path):
    import socket
    import subprocess
    import time

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    migrate.upgrade(url)
    sessions = make_sessionmaker(make_engine(url))
    dead = subprocess.Popen(["true"])
    dead.wait()
    holder = f"{socket.gethostname()}:{dead.pid}"
    with sessions.begin() as s:
        ensure_lease(s, holder, 600.0, time.time())
    config = dataclasses.replace(load_config(str(_conf(tmp_path))), lease_ttl_s=5.0)
    hopsd_main.take_lease(sessions, config, "me:1")
    from hopsd.ledger.lease import lease_info

    with sessions.begin() as s:
        info = lease_info(s)
        assert info is not None and info.holder == "me:1"


def test_overrunning_tick_is_warned_about(config, port, sessions, clock, caplog):
    tiny = dataclasses.replace(config, queue_refresh_s=1e-9)
    service = Service(Tick(tiny, port, sessions, clock=clock))
    service.run_once()
    assert "event=tick-overrun" in caplog.text


def test_second_daemon_waits_as_a_standby_and_leads_once_the_lease_runs_out(tmp_path, capsys):
    """The default: no exit 4; it takes over after the holder's lease ran out, token raised."""
    import time

    from hopsd.ledger.lease import lease_info

    path = _conf(tmp_path, "[scheduler]\nqueue_refresh_s = 0.2\n[daemon]\nlease_ttl_s = 1.0\n")
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    migrate.upgrade(url)
    sessions = make_sessionmaker(make_engine(url))
    with sessions.begin() as s:
        held = ensure_lease(s, "otherhost:4242", 1.5, time.time())
    started = time.monotonic()
    assert hopsd_main.main(["--config", str(path), "--ticks", "1"]) == 0
    waited = time.monotonic() - started
    assert waited >= held.expires_at - time.time() - 3.0  # it did wait for the expiry
    err = capsys.readouterr().err
    assert "event=standby leader=otherhost:4242" in err
    assert f"event=leading holder={hopsd_main.holder_name()} token={held.token + 1}" in err
    with sessions.begin() as s:
        info = lease_info(s)
        assert info is not None and info.holder is None  # released at a clean exit


def test_no_standby_exits_naming_the_holder(tmp_path, capsys):
    path = _leased_elsewhere(tmp_path)
    assert hopsd_main.main(["--config", str(path), "--no-standby", "--ticks", "1"]) == 4
    assert "otherhost:4242" in capsys.readouterr().err
