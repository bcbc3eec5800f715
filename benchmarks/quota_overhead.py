"""What keeping Slurm's GPU limits adds to a scheduling step, at the paper's simulation scale.

512 GPUs in 64 eight-GPU servers, 2000 queued jobs of 200 users in 20 accounts,
every account with a GPU limit (``GrpTRES``) and every user one in a QOS
(``MaxTRESPerUser``). Times the two passes of :mod:`hopsd.core.quota` --
cutting demands before planning, dropping excess starts after -- around a
FIFO round plan, and that plan itself for scale.

    .venv/bin/python benchmarks/quota_overhead.py [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from hopsd.core.model import Cluster, GpuType, Job, Node
from hopsd.core.quota import Quota, group_keys, offered, within
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.plugins import get_policy

N_JOBS, N_USERS, N_ACCOUNTS = 2000, 200, 20
REPEATS = 5


def world(rng: random.Random) -> tuple[Snapshot, Quota]:
    types = ("k80", "v100", "a100", "h100")
    nodes = [Node(f"{t}-{i:02d}", t, 8) for t in types for i in range(16)]
    cluster = Cluster.build([GpuType(t, speed=1.0 + k) for k, t in enumerate(types)], nodes)
    demand_sets = [(1,), (1, 2), (2, 4), (1, 2, 4, 8)]
    jobs = []
    for i in range(N_JOBS):
        user = f"u{rng.randrange(N_USERS)}"
        account = f"acct{int(user[1:]) % N_ACCOUNTS}"
        jobs.append(
            Job(f"j{i}", rng.choice(demand_sets), 1e6, user=user, account=account,
                wait_time=rng.uniform(0, 3600))
        )  # fmt: skip
    limits = {f"account:acct{a}": 24 for a in range(N_ACCOUNTS)}
    limits.update({f"qos-user:normal/u{u}": 8 for u in range(N_USERS)})
    groups = {j.id: group_keys(j.user, j.account, "normal") for j in jobs}
    return Snapshot(0.0, cluster, tuple(jobs)), Quota(limits=limits, groups=groups)


def best_of(run: object) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    snapshot, quota = world(random.Random(7))
    policy, settings = get_policy("fifo"), Settings()
    cut = offered(snapshot, quota, fragment=False)
    plan = policy.plan(cut, settings)
    figures = {
        "jobs": N_JOBS,
        "offered_s": best_of(lambda: offered(snapshot, quota, fragment=False)),
        "within_s": best_of(lambda: within(plan, quota)),
        "fifo_plan_s": best_of(lambda: policy.plan(cut, settings)),
        "starts_planned": len(plan.start),
        "starts_kept": len(within(plan, quota).start),
    }
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:16} {value:.4f}" if isinstance(value, float) else f"{key:16} {value}")


if __name__ == "__main__":
    main()
