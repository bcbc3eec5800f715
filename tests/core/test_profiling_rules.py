"""The profiling queue's rules in the core step: placement, stops, ends, GPUs taken first."""

from __future__ import annotations

from hopsd.core.fairshare import FairShareRule, Usage
from hopsd.core.model import Cluster, GpuType, Job, Node
from hopsd.core.profiling import (
    OVER_ALL_TYPES,
    OVER_DEADLINE,
    OVER_KNOWN,
    OVER_NO_GPU,
    OVER_OFF,
    OVER_SILENT,
    KnownProfile,
    Profilee,
    ProfilingRules,
    RunInFlight,
    derived_profiles,
    derived_types,
    profiling_step,
)
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot
from hopsd.core.step import RoundClock, StepOptions, schedule_step
from hopsd.core.throughput import PhaseProfile
from hopsd.plugins import get_policy

CLUSTER = Cluster.build(
    [GpuType("k80", speed=1.0), GpuType("a100", speed=4.0)],
    [Node("k1", "k80", 2), Node("a1", "a100", 2), Node("a2", "a100", 1)],
)
RULES = ProfilingRules(enabled=True, timeout_s=10.0)
ALL_FREE = {"k1": 2, "a1": 2, "a2": 1}


def step(*jobs: Profilee, free: dict[str, int] | None = None, now: float = 5.0):  # type: ignore[no-untyped-def]
    return profiling_step(jobs, CLUSTER, ALL_FREE if free is None else free, RULES, now)


def test_new_job_goes_to_the_freest_node_of_a_type_it_still_needs() -> None:
    got = step(Profilee("j", 0.0, 0.0))
    assert [(r.job_id, r.gpu_type, r.node) for r in got.start] == [("j", "k80", "k1")]
    assert got.reserved == {"k1": 1}
    done_k80 = step(Profilee("j", 0.0, 0.0, profiled=frozenset({"k80"}), runs=1))
    assert [(r.gpu_type, r.node) for r in done_k80.start] == [("a100", "a1")]


def test_oldest_job_first_and_no_gpu_given_twice() -> None:
    got = step(Profilee("new", 9.0, 9.0), Profilee("old", 1.0, 1.0), free={"k1": 1})
    assert [r.job_id for r in got.start] == ["old"]
    assert "new" not in {j for j, _ in got.finish}
    assert "waiting for a free GPU" in got.reasons["new"]


def test_a_profiled_run_is_stopped_and_a_silent_one_after_the_timeout() -> None:
    run = RunInFlight("a100", "a1", since=0.0, started=True)
    done = step(Profilee("j", 0.0, 0.0, profiled=frozenset({"a100"}), run=run, runs=1), now=3.0)
    assert done.stop == (("j", "profiled on a100"),)
    waiting = step(Profilee("j", 0.0, 0.0, run=run, runs=1), now=3.0)
    assert not waiting.acted
    silent = step(Profilee("j", 0.0, 0.0, run=run, runs=1), now=11.0)
    assert silent.stop == (("j", "no profile from a100 in time"),)


def test_a_run_that_gave_no_report_ends_profiling_instead_of_trying_the_next_type() -> None:
    """The job is restarted at most once for profiling that produced nothing."""
    after_silent_run = Profilee("j", 0.0, 0.0, runs=1)
    got = step(after_silent_run, now=12.0)
    assert got.finish == (("j", OVER_SILENT),) and not got.start
    # one good profile, then a silent run: over too (the good profile is kept and derived from)
    one_good = Profilee("j", 0.0, 0.0, profiled=frozenset({"a100"}), runs=2)
    assert step(one_good, now=12.0).finish == (("j", OVER_SILENT),)


def test_switched_off_profiling_stops_runs_and_queues_held_jobs() -> None:
    off = ProfilingRules(enabled=False, timeout_s=10.0)
    run = RunInFlight("a100", "a1", since=0.0, started=True)
    jobs = (Profilee("held", 0.0, 0.0), Profilee("running", 1.0, 1.0, run=run, runs=1))
    got = profiling_step(jobs, CLUSTER, ALL_FREE, off, 1.0)
    assert got.finish == (("held", OVER_OFF),) and got.stop == (("running", OVER_OFF),)
    assert not got.start


def test_released_run_keeps_its_gpu_and_is_held_when_it_never_starts() -> None:
    run = RunInFlight("k80", "k1", since=0.0, started=False)
    pending = step(Profilee("j", 0.0, 0.0, run=run, runs=1), now=3.0)
    assert pending.reserved == {"k1": 1} and not pending.acted
    late = step(Profilee("j", 0.0, 0.0, run=run, runs=1), now=11.0)
    assert late.hold == (("j", "profiling run on k80 did not start in time"),)
    # its type is skipped afterwards, and the not-started run counts as silent
    skipped = Profilee("j", 0.0, 0.0, skipped=frozenset({"k80"}), runs=1)
    assert step(skipped, now=12.0).finish == (("j", OVER_SILENT),)


def test_profiling_ends_when_done_at_the_deadline_or_when_no_gpu_is_left() -> None:
    both = frozenset({"a100", "k80"})
    assert step(Profilee("j", 0.0, 0.0, profiled=both, runs=2)).finish == (("j", OVER_ALL_TYPES),)
    assert step(Profilee("j", 0.0, 0.0), now=31.0).finish == (("j", OVER_DEADLINE),)
    one = Profilee("j", 0.0, 0.0, profiled=frozenset({"a100"}), runs=1)
    assert step(one, free={"k1": 0, "a1": 2, "a2": 1}).finish == (("j", OVER_NO_GPU),)
    assert derived_types(CLUSTER, frozenset({"a100"})) == ("a100", ["k80"])
    assert derived_types(CLUSTER, frozenset()) == (None, [])


def test_the_step_serves_profiling_first_and_the_policy_gets_the_rest() -> None:
    """The profiling run takes one GPU of k1 (the first of the freest nodes) before the policy
    plans: whatever the policy does with the queued job, k1's other GPU is all it gets."""
    queued = Job("q", (2,), 1e6)
    snapshot = Snapshot(
        now=0.0,
        cluster=CLUSTER,
        jobs=(queued,),
        profiling=(Profilee("p", 0.0, 0.0),),
    )
    options = StepOptions(profiling=RULES)
    result = schedule_step(snapshot, RoundClock(100.0), get_policy("fifo"), Settings(), options)
    assert [(r.job_id, r.node) for r in result.profiling.start] == [("p", "k1")]
    assert result.reasons["p"].startswith("profiling on k80")
    used = result.plan.gpus_used()
    assert used.get("k1", 0) + 1 <= 2  # the run's GPU is never handed out again


def test_the_step_computes_share_factors_from_usage() -> None:
    jobs = (Job("a", (1,), 1e6, user="heavy"), Job("b", (1,), 1e6, user="light"))
    usage = Usage(users={"heavy": 100.0, "light": 0.0}, accounts={"": 100.0})
    snapshot = Snapshot(now=0.0, cluster=CLUSTER, jobs=jobs, usage=usage)
    seen: list[Snapshot] = []

    class Spy:
        name = "spy"

        def plan(self, snap: Snapshot, settings: Settings):  # type: ignore[no-untyped-def]
            seen.append(snap)
            return get_policy("fifo").plan(snap, settings)

        def plan_fragment(self, snap: Snapshot, settings: Settings):  # type: ignore[no-untyped-def]
            return get_policy("fifo").plan_fragment(snap, settings)

    options = StepOptions(fairshare=FairShareRule({}, 1.0))
    schedule_step(snapshot, RoundClock(100.0), Spy(), Settings(), options)
    factors = {j.id: j.share_factor for j in seen[0].jobs}
    assert factors["b"] > 1.0 > factors["a"]  # under share above 1, over share below
    schedule_step(snapshot, RoundClock(100.0), Spy(), Settings(), StepOptions())
    assert {j.share_factor for j in seen[1].jobs} == {1.0}  # weight 0: the pure method


def test_one_plan_diff_for_every_policy() -> None:
    """start / keep / move / preempt from target placements, in the order given."""
    from hopsd.core.model import Configuration
    from hopsd.core.plandiff import arrival_order, diff_plan

    k1 = Configuration("k80", (("k1", 1),))
    a1 = Configuration("a100", (("a1", 1),))
    jobs = [
        Job("new", (1,), 1e6, submit_time=3.0),
        Job("stay", (1,), 1e6, submit_time=1.0, current=k1),
        Job("go", (1,), 1e6, submit_time=2.0, current=a1),
        Job("out", (1,), 1e6, submit_time=0.0, current=Configuration("a100", (("a2", 1),))),
    ]
    plan = diff_plan(jobs, {"new": a1, "stay": k1, "go": Configuration("k80", (("k1", 1),))})
    assert [a.job_id for a in plan.start] == ["new"]
    assert [a.job_id for a in plan.keep] == ["stay"]
    assert [a.job_id for a in plan.move] == ["go"] and plan.preempt == ("out",)
    pinned = diff_plan(jobs, {}, pinned=frozenset({"go"}))
    assert [a.job_id for a in pinned.keep] == ["go"] and set(pinned.preempt) == {"stay", "out"}
    assert [j.id for j in arrival_order(jobs)] == ["out", "stay", "go", "new"]


def test_types_the_jobs_model_was_measured_on_are_not_profiled_again() -> None:
    """Known on every type: over at once, no run (no requeue for nothing); known on a100
    only: profiled on k80 alone, even with a100 GPUs free, and not waited for when no k80
    GPU is free (the known profile is one, as a measured one would be)."""
    a100 = KnownProfile("a100", PhaseProfile(0.01, 0.02, 0.005))
    k80 = KnownProfile("k80", PhaseProfile(0.04, 0.08, 0.02))
    both = step(Profilee("j", 0.0, 0.0, known=(a100, k80)))
    assert both.finish == (("j", OVER_KNOWN),) and not both.start and not both.reserved
    one = step(Profilee("j", 0.0, 0.0, known=(a100,)), free={"k1": 0, "a1": 2, "a2": 1})
    assert one.finish == (("j", OVER_NO_GPU),) and not one.start  # a100's tells enough
    one_free = step(Profilee("j", 0.0, 0.0, known=(a100,)))
    assert [(r.gpu_type, r.node) for r in one_free.start] == [("k80", "k1")]
    after = Profilee("j", 0.0, 0.0, profiled=frozenset({"k80"}), runs=1, known=(a100,))
    assert step(after).finish == (("j", OVER_KNOWN),)


def test_derived_profiles_take_the_known_ones_before_scaling() -> None:
    measured_k80 = PhaseProfile(0.04, 0.08, 0.02)
    known_a100 = PhaseProfile(0.015, 0.03, 0.004)  # not k80's / 4: the model's own gain
    got = derived_profiles(CLUSTER, {"k80": measured_k80}, (KnownProfile("a100", known_a100),))
    assert got == {"a100": known_a100}
    scaled = derived_profiles(CLUSTER, {"k80": measured_k80}, ())
    assert scaled["a100"].t_b == measured_k80.t_b / 4.0  # admin speeds 1 and 4
    from_known = derived_profiles(CLUSTER, {}, (KnownProfile("a100", known_a100),))
    assert from_known["a100"] == known_a100 and from_known["k80"].t_b == known_a100.t_b * 4.0
    assert derived_profiles(CLUSTER, {}, ()) == {}
    elsewhere = derived_profiles(CLUSTER, {}, (KnownProfile("h100", known_a100),))
    assert elsewhere == {}  # a type this cluster does not have tells nothing
