"""One decision path, live: a workload run by hopsd on the test cluster, then replayed.

The replay reads the test's own ledger exactly as ``hops replay`` does and runs
the policy hopsd ran through the same scheduling step. It must replay every
job, and its JCTs must stay near the live ones (the remaining gap is what the
simulator does not model: Slurm's launch latency, tick granularity, learning
from probes; ``benchmarks/live_vs_replay.py`` measures it on a longer workload).

Needs ``docker/cluster.sh up`` (``SLURM_CONF`` set); skipped otherwise.
"""

from __future__ import annotations

from daemon_live import LIVE
from live_replay import Arrival, compare, replay_live, run_live

pytestmark = LIVE

WORKLOAD = [
    Arrival(0, (1, 2), 2400),
    Arrival(0, (2, 4), 6000, "a100=6"),
    Arrival(1, (4,), 4800),
    Arrival(3, (1,), 1500, "v100=3"),
    Arrival(5, (1, 2, 4), 4800),
    Arrival(8, (2,), 3200),
]


def test_replaying_the_ledger_runs_every_job_near_its_live_jct(env):
    window = run_live(env, WORKLOAD, deadline_s=180)
    results = replay_live(env, window, env.config.policy)

    assert results["live_policy"] == "hops" and list(results["policies"]) == ["hops"]
    assert results["n_jobs"] == len(WORKLOAD) and results["skipped"] == {}
    assert {r["job_id"] for r in results["jobs"]} == {str(j) for j in env.submitted}
    # the cluster replayed is the test cluster's managed nodes, as Slurm lists them
    assert results["nodes_from"] == "slurm" and results["total_gpus"] == 18
    assert results["round_length_s"] == env.config.round_length_s
    figures = compare(results, "hops")
    for row in figures["per_job"]:
        ratio = row["replay_jct_s"] / row["live_jct_s"]
        assert 0.25 <= ratio <= 4.0, row
    assert figures["avg_jct_error"] <= 0.4, figures
