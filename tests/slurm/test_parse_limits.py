"""GPU limits and shares as recorded from ``sacctmgr`` and ``sshare`` on Slurm 22.05.

The recordings come from the test cluster after:

* accounts ``fs_a`` (fairshare 3) and ``fs_b`` (fairshare 1, ``MaxTRES=gres/gpu=4``),
  ``lim_a`` (``GrpTRES=cpu=16,gres/gpu=2,gres/gpu:a100=1``), root a user in each;
* user ``nobody`` in ``lim_a`` with ``GrpTRES=gres/gpu=3 MaxTRES=gres/gpu=1`` and
  QOS ``gpu2,normal``;
* QOS ``gpu2``: ``GrpTRES=gres/gpu=6 MaxTRESPerUser=gres/gpu=2
  MaxTRESPerAccount=gres/gpu=4 MaxTRES=cpu=8,gres/gpu=3``;
* (associations only) the live tests' accounts (``hopslim``, ``hopsfs3``,
  ``hopsfs1``) and ``hopssub``, a sub-account of ``fs_a`` with user ``nobody``.
"""

from __future__ import annotations

import pytest
from recorded import recorded

from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.errors import SlurmParseError
from hopsd.slurm.parse_limits import (
    AssocLimit,
    QosLimit,
    ShareRow,
    hops_shares,
    parse_assocs,
    parse_partition_times,
    parse_qos,
    parse_shares,
    slurm_duration_s,
    tres_gpus,
)
from hopsd.slurm.port import SlurmPolicyReads
from hopsd.slurm.runner import CompletedRun


def on_2205(name: str) -> str:
    return recorded(f"{name}.22.05.txt")


def test_associations_with_their_gpu_limits() -> None:
    assocs = {(a.account, a.user): a for a in parse_assocs(on_2205("sacctmgr_assoc"))}
    assert assocs[("lim_a", "")] == AssocLimit("lim_a", "", "", 2, None, ("normal",), "root")
    assert assocs[("lim_a", "nobody")] == AssocLimit(
        "lim_a", "nobody", "", 3, 1, ("gpu2", "normal")
    )
    # sacctmgr lists the per-job limit a user inherits from the account
    assert assocs[("fs_b", "root")].job_gpus == 4
    assert assocs[("fs_a", "root")] == AssocLimit("fs_a", "root", "", None, None, ("normal",))
    assert assocs[("hopssub", "")].parent == "fs_a"  # a sub-account
    assert assocs[("hopslim", "")].grp_gpus == 2  # the live tests' account
    assert len(assocs) == 17


def test_qos_with_their_gpu_limits() -> None:
    qos = {q.name: q for q in parse_qos(on_2205("sacctmgr_qos"))}
    assert qos == {
        "normal": QosLimit("normal", None, None, None, None),
        "gpu2": QosLimit("gpu2", 6, 2, 4, 3),
    }


def test_shares_of_the_association_tree() -> None:
    rows = parse_shares(on_2205("sshare"))
    assert rows[0] == ShareRow("root", "", None)
    assert ShareRow("fs_a", "", 3.0) in rows and ShareRow("fs_b", "", 1.0) in rows
    assert ShareRow("lim_a", "nobody", 1.0) in rows
    assert hops_shares(rows) == {
        "root": 1.0,
        "account:fs_a": 3.0,
        "account:fs_b": 1.0,
        "account:lim_a": 1.0,
        "nobody": 1.0,
    }


def test_parent_shares_give_no_share_of_their_own() -> None:
    rows = parse_shares(" acct||parent|\n  acct|ann|5|0.5\n")
    assert rows == (ShareRow("acct", "", None), ShareRow("acct", "ann", 5.0))
    assert hops_shares(rows) == {"ann": 5.0}


def test_typed_gpu_limits_are_not_the_gpu_count() -> None:
    assert tres_gpus("cpu=16,gres/gpu:a100=1") is None
    assert tres_gpus("gres/gpu:a100=1,gres/gpu=2") == 2
    assert tres_gpus("") is None
    with pytest.raises(SlurmParseError):
        tres_gpus("gres/gpu=lots")


def test_a_line_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(SlurmParseError):
        parse_qos("normal|||\n")


def test_the_cli_backend_reads_limits_with_two_sacctmgr_calls() -> None:
    calls: list[list[str]] = []
    answers = {"assoc": on_2205("sacctmgr_assoc"), "qos": on_2205("sacctmgr_qos")}

    def run(argv: list[str], timeout: float) -> CompletedRun:
        calls.append(list(argv))
        return CompletedRun(tuple(argv), 0, answers[argv[4]], "")

    port = CliSlurm(run=run)
    assert isinstance(port, SlurmPolicyReads)
    limits = port.gpu_limits()
    assert [c[:5] for c in calls] == [
        ["sacctmgr", "-n", "-P", "show", "assoc"],
        ["sacctmgr", "-n", "-P", "show", "qos"],
    ]
    assert len(limits.assocs) == 17 and len(limits.qos) == 2


def test_partition_max_times_in_seconds() -> None:
    # recorded after ``scontrol update PartitionName=... MaxTime=``: k80 90 (minutes),
    # v100 5, a100 1-02:03:04 (Slurm keeps whole minutes)
    times = parse_partition_times(on_2205("sinfo_partition_time"))
    assert times == {
        "k80": 5400.0,
        "v100": 300.0,
        "a100": 86400.0 + 2 * 3600 + 4 * 60,
        "all": None,
        "hops": None,
    }
    assert slurm_duration_s("UNLIMITED") is None and slurm_duration_s("45") == 45.0
    with pytest.raises(SlurmParseError):
        slurm_duration_s("1-2-3")


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_squeue_says_each_jobs_qos(release: str) -> None:
    from hopsd.slurm.parse_squeue import parse_jobs

    jobs = parse_jobs(recorded(f"squeue.{release}.json"))
    assert jobs and {j.qos for j in jobs} == {"normal"}
