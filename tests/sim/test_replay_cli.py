"""``hops replay`` on a real SQLite ledger: the window, figures beside the live ones, errors."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hops_cli.main import app
from hops_cli.replay import window_of
from hopsd.core.model import Configuration
from hopsd.ledger.allocations import record_allocation
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.history import peak_nodes, read_history
from hopsd.ledger.jobs import JobProgress, JobSpec, add_job, apply_progress
from hopsd.ledger.jobs import transition as job_transition
from hopsd.ledger.migrate import upgrade
from hopsd.ledger.models import AllocationReason, AllocationRow, JobState
from hopsd.ledger.rounds import RoundSummary, record_round
from hopsd.ledger.throughput_store import SqlThroughputStore
from hopsd.slurm.errors import SlurmError

runner = CliRunner()
R = AllocationReason


def _conf(tmp_path: Path, url: str) -> Path:
    conf = tmp_path / "hops.conf"
    conf.write_text(
        f'[ledger]\nurl = "{url}"\n[slurm]\nbackend = "cli"\ntimeout_s = 1.0\n'
        "[scheduler]\nround_length_s = 8.0\nqueue_refresh_s = 1.0\nrestart_penalty_s = 2.0\n"
        "[gpu_types.k80]\nspeed = 1.0\n[gpu_types.a100]\nspeed = 4.0\n"
    )
    return conf


def _no_slurm(*args: object, **kwargs: object) -> object:
    raise SlurmError("sinfo: not reachable")


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> float:
    """Three finished jobs and one queued, an hour ago, with allocations and learned rates."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    t0 = time.time() - 3600
    plan = [  # id, demands, samples, submit, start, end, config
        ("j1", (1, 2), 4000.0, 0.0, 1.0, 21.0, Configuration.of("a100", {"a100n1": 1})),
        ("j2", (2,), 6000.0, 2.0, 3.0, 33.0, Configuration.of("a100", {"a100n1": 2})),
        ("j3", (1,), 1000.0, 4.0, 5.0, 15.0, Configuration.of("k80", {"k80n1": 1})),
    ]
    with sessions.begin() as s:
        store = SqlThroughputStore(s, t0)
        for jid, demands, samples, submit, start, end, config in plan:
            row = add_job(
                s,
                JobSpec(jid, "alice", demands, samples, t0 + submit, slurm_job_id=int(jid[1:])),
                t0 + submit,
            )
            job_transition(row, JobState.QUEUED, t0 + submit)
            job_transition(row, JobState.RUNNING, t0 + start)
            job_transition(row, JobState.DONE, t0 + end)
            row.first_start_time = t0 + start
            row.end_time = t0 + end
            s.flush()
            apply_progress(
                s, [JobProgress(jid, wait_time=start - submit, latency_ratio=0.05)], t0 + end
            )
            record_allocation(s, None, jid, R.START, config, t0 + start)
            record_allocation(s, None, jid, R.END, None, t0 + end)
            per_gpu = samples / (end - start) / config.total_gpus
            store.set_type_aggregated(jid, config.gpu_type, config.total_gpus, per_gpu)
            store.set_entity_aggregated(jid, config.parts[0][0], config.total_gpus, per_gpu)
        # hopsd's round clock: its first full round 3 s after the first arrival
        note = '{"kind":"round","actions":[],"notes":[]}'
        record_round(s, RoundSummary(number=1, started_at=t0 + 3.0, note=note))
        queued = add_job(s, JobSpec("j4", "bob", (1,), 1e6, t0 + 6, slurm_job_id=4), t0 + 6)
        job_transition(queued, JobState.QUEUED, t0 + 6)
    engine.dispose()
    monkeypatch.setenv("HOPS_CONF", str(_conf(tmp_path, url)))
    monkeypatch.setattr("hopsd.slurm.factory.make_port", _no_slurm)  # nodes from the ledger
    return t0


def test_replay_json_sets_each_policy_beside_the_live_figures(
    ledger: float, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["replay", "--since", "2h", "--policies", "hops,fifo", "--json", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["n_jobs"] == 3 and doc["load_only"] == {"queued": 1} and doc["skipped"] == {}
    assert doc["nodes"] == {"a100n1": ["a100", 3], "k80n1": ["k80", 1]}
    assert doc["nodes_from"] == "ledger"
    assert doc["round_length_s"] == 8.0 and doc["spare_guard_s"] == 2.0
    # the replay's rounds fall where hopsd's did, not at the first arrival
    assert doc["first_round_s"] == pytest.approx(3.0)
    # moves are enacted under hopsd's notice, in flight and reserved meanwhile, as live
    assert doc["notice_grace_s"] == 120.0
    assert doc["live"]["avg_jct_s"] == pytest.approx((21 + 31 + 11) / 3)
    for name in ("hops", "fifo"):
        figures = doc["policies"][name]
        assert set(figures) >= {"avg_jct_s", "p99_jct_s", "avg_wait_s", "max_lr", "restarts"}
        # each job ran at what it was measured to do on the GPUs it ran on (20, 30, 10 s),
        # at best scaled to its largest demand and to a100's speed (4x k80), plus some waiting
        for row, measured in zip(doc["jobs"], (20.0, 30.0, 10.0), strict=True):
            least = measured * row["demands"][0] / row["demands"][-1] / 4.0
            assert least - 1e-6 <= row[f"{name}_jct_s"] <= measured + 20.0, row
    assert (out / "results.json").exists() and (out / "jobs_hops.csv").exists()
    assert list(out.glob("*.png"))


def test_replay_table_names_live_and_replayed_runs(ledger: float) -> None:
    result = runner.invoke(app, ["replay", "--from", str(ledger - 10), "--policies", "fifo"])
    assert result.exit_code == 0, result.output
    assert "live (hops)" in result.stdout and "replay fifo" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "1m"], "no job was submitted"),
        (["--since", "soon"], "--since: not a time"),
        (["--since", "1h", "--from", "0"], "either --since or --from"),
        (["--from", "2026-13-01"], "--from: not a time"),
        (["--since", "2h", "--policies", "nope"], "unknown policy 'nope'"),
    ],
)
def test_replay_errors_are_one_hops_line(ledger: float, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["replay", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hops:") and message in lines[0], lines


def test_replay_without_a_ledger_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOPS_CONF", str(_conf(tmp_path, f"sqlite:///{tmp_path / 'none.db'}")))
    monkeypatch.setattr("hopsd.slurm.factory.make_port", _no_slurm)
    result = runner.invoke(app, ["replay"])
    assert result.exit_code != 0
    assert result.output.startswith("hops: no ledger at")


def test_window_parsing() -> None:
    assert window_of(None, None, None, 1000.0 * 86400) == (999.0 * 86400, 1000.0 * 86400)
    assert window_of(None, "10", "20", 100.0) == (10.0, 20.0)
    with pytest.raises(ValueError, match="--to must be after"):
        window_of(None, "20", "10", 100.0)


def test_peak_counts_a_decision_once_it_is_whole() -> None:
    """A start written before the preempt it replaces does not double the node's load."""

    def row(job: str, reason: AllocationReason, at: float, gpus: int = 0) -> AllocationRow:
        parts = [["n1", gpus]] if gpus else None
        return AllocationRow(job_id=job, reason=reason, gpu_type="a100", parts=parts, at=at)

    allocs = [row("a", R.START, 1.0, 4), row("b", R.START, 2.0, 4), row("a", R.PREEMPT, 2.0)]
    (seen,) = peak_nodes(allocs)
    assert (seen.node, seen.gpu_type, seen.peak_gpus) == ("n1", "a100", 4)


def test_history_reads_only_the_window(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    upgrade(url)
    sessions = make_sessionmaker(make_engine(url))
    with sessions.begin() as s:
        for i, t in enumerate((10.0, 20.0, 30.0)):
            add_job(s, JobSpec(f"j{i}", "u", (1,), 10.0, t, slurm_job_id=i), t)
    with sessions.begin() as s:
        got = read_history(s, 15.0, 30.0)
    assert [j.job_id for j in got.jobs] == ["j1", "j2"] and got.rates == () and got.nodes == ()


def test_a_replayed_job_keeps_the_gpu_types_its_tag_allowed() -> None:
    """A job submitted with --types v100 ran only on V100s live; replayed, it is kept off
    the other types (it once ran on A100s there, faster than it ever could)."""
    from dataclasses import dataclass

    from hops_cli.replay import excluded_types
    from hopsd.slurm.tag import HopsTag

    @dataclass
    class Seen:
        job_id: str
        adopted_tag: str

    jobs = [
        Seen("v", HopsTag((1,), 100.0, types=("v100",)).encode()),
        Seen("x", HopsTag((1,), 100.0, exclude_types=("k80",)).encode()),
        Seen("any", HopsTag((1,), 100.0).encode()),
        Seen("old", ""),
    ]
    assert excluded_types(jobs, ["a100", "k80", "v100"]) == {
        "v": frozenset({"a100", "k80"}),
        "x": frozenset({"k80"}),
    }


def test_replay_runs_each_policy_with_its_hops_conf_table(ledger: float) -> None:
    conf = Path(os.environ["HOPS_CONF"])
    conf.write_text(conf.read_text() + '[policies.sia]\nqueue_order = "arrival"\n')
    args = ["replay", "--since", "2h", "--policies", "fifo,sia", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    recorded = json.loads(result.stdout)["policy_settings"]
    assert recorded == {"fifo": {"backfill": True}, "sia": {"queue_order": "arrival"}}
    conf.write_text(conf.read_text() + "[policies.fifo]\nbackfill = 1\n")
    bad = runner.invoke(app, args)
    assert bad.exit_code == 2
    assert "policies.fifo.backfill: expected bool, got int 1" in bad.output
