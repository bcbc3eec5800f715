"""Slurm's limits and shares in hopsd: read at most once per refresh, turned into a quota."""

from __future__ import annotations

from pathlib import Path

import pytest

from hopsd.config import ConfigError, parse_config
from hopsd.daemon.slurm_policy import Cached, SlurmPolicy, quota_of, type_max_times
from hopsd.daemon.views import Observation, ObservedJob
from hopsd.slurm.errors import SlurmCommandError
from hopsd.slurm.parse_limits import SlurmLimits, parse_assocs, parse_qos, parse_shares

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
LIMITS = SlurmLimits(
    parse_assocs((FIXTURES / "sacctmgr_assoc.22.05.txt").read_text()),
    parse_qos((FIXTURES / "sacctmgr_qos.22.05.txt").read_text()),
)


def job(slurm_id: int, user: str, account: str, qos: str, gpus: int = 0) -> ObservedJob:
    state = "RUNNING" if gpus else "PENDING"
    nodes = {"n1": gpus} if gpus else {}
    return ObservedJob(slurm_id, user, account, state, nodes=nodes, qos=qos)


def test_recorded_limits_become_the_quota_of_the_jobs_groups() -> None:
    obs = Observation(
        0.0,
        (
            job(1, "nobody", "lim_a", "gpu2"),
            job(2, "root", "lim_a", "normal"),
            job(3, "nobody", "lim_a", "gpu2", gpus=1),  # not hops's: held against the groups
        ),
        (),
    )
    quota = quota_of(LIMITS, obs, {"a": 1, "b": 2})
    assert quota.limits["account:lim_a"] == 2
    assert quota.limits["assoc:lim_a/nobody"] == 3
    assert quota.limits["qos:gpu2"] == 6
    assert quota.limits["qos-user:gpu2/nobody"] == 2
    assert quota.limits["qos-account:gpu2/lim_a"] == 4
    assert quota.job_caps["assoc:lim_a/nobody"] == 1 and quota.job_caps["qos:gpu2"] == 3
    assert quota.foreign == {
        "account:lim_a": 1,
        "account:root": 1,  # lim_a's parent
        "assoc:lim_a/nobody": 1,
        "qos:gpu2": 1,
        "qos-user:gpu2/nobody": 1,
        "qos-account:gpu2/lim_a": 1,
    }
    assert quota.job_room("a", {}) == 1  # nobody's per-job cap
    assert quota.job_room("b", {}) == 1  # the account's 2, one held by job 3


def test_an_accounts_limit_covers_its_sub_accounts_jobs() -> None:
    obs = Observation(0.0, (job(1, "nobody", "hopssub", "normal"),), ())
    quota = quota_of(LIMITS, obs, {"a": 1})
    assert quota.groups["a"][:2] == ("account:hopssub", "assoc:hopssub/nobody")
    assert {"account:fs_a", "account:root"} <= set(quota.groups["a"])


class Reads:
    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def gpu_limits(self) -> SlurmLimits:
        self.calls += 1
        if self.fail:
            raise SlurmCommandError(["sacctmgr"], 1, "no accounting database", "")
        return LIMITS

    def shares(self) -> tuple[object, ...]:
        self.calls += 1
        return parse_shares((FIXTURES / "sshare.22.05.txt").read_text())

    def partition_times(self) -> dict[str, float | None]:
        self.calls += 1
        return {"v100": 300.0, "all": None}


def test_reads_are_cached_for_the_refresh_and_a_failure_keeps_the_last_answer() -> None:
    now = [0.0]
    reads = Reads()
    cached = Cached(reads.gpu_limits, 60.0, "limits", clock=lambda: now[0])
    assert cached.get() is LIMITS and cached.get() is LIMITS and reads.calls == 1
    now[0] = 61.0
    reads.fail = True
    assert cached.get() is LIMITS and reads.calls == 2
    assert Cached(Reads(fail=True).gpu_limits, 60.0, "limits").get() is None


def test_only_what_hops_conf_asks_is_read() -> None:
    reads = Reads()
    policy = SlurmPolicy.of(reads, limits=False, shares=True, ttl_s=60.0)
    assert policy.gpu_limits() is None
    assert policy.share_table() == {
        "root": 1.0,
        "account:fs_a": 3.0,
        "account:fs_b": 1.0,
        "account:lim_a": 1.0,
        "nobody": 1.0,
    }
    assert reads.calls == 1
    assert SlurmPolicy.of(object(), limits=True, shares=True, ttl_s=1.0).gpu_limits() is None


def test_shares_come_from_one_place() -> None:
    base = '[ledger]\nurl = "sqlite:////tmp/x.db"\n[fairshare]\n'
    assert parse_config(base + 'source = "slurm"\n').fairshare_source == "slurm"
    with pytest.raises(ConfigError, match=r"fairshare\.source"):
        parse_config(base + 'source = "sshare"\n')
    with pytest.raises(ConfigError, match=r"fairshare\.shares"):
        parse_config(base + 'source = "slurm"\nshares = { alice = 2 }\n')


def test_each_type_takes_the_max_time_of_the_partition_hops_places_it_through() -> None:
    partition_of = {"v1": "v100", "v2": "v100", "a1": "a100", "k1": "all"}
    types = {"v1": "v100", "v2": "v100", "a1": "a100", "k1": "k80"}
    times = {"v100": 300.0, "a100": 7200.0, "all": None}
    assert type_max_times(partition_of, types, times) == {"v100": 300.0, "a100": 7200.0}
    reads = Reads()
    policy = SlurmPolicy.of(reads, limits=True, shares=False, ttl_s=60.0)
    assert policy.partition_times() == {"v100": 300.0, "all": None}


def test_hops_fairness_compares_with_the_shares_hopsd_applies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hopsd.views.fairness import configured_shares

    base = '[ledger]\nurl = "sqlite:////tmp/x.db"\n[fairshare]\n'
    own = parse_config(base + "shares = { alice = 2 }\n")
    assert configured_shares(own) == ({"alice": 2.0}, None)
    monkeypatch.setattr("hopsd.slurm.factory.port_from_config", lambda config: Reads())
    shares, error = configured_shares(parse_config(base + 'source = "slurm"\n'))
    assert error is None and shares["account:fs_a"] == 3.0 and shares["account:fs_b"] == 1.0
    monkeypatch.setattr("hopsd.slurm.factory.port_from_config", lambda config: object())
    assert configured_shares(parse_config(base + 'source = "slurm"\n'))[0] == {}
