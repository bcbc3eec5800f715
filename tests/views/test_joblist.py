"""The pure job payloads: names, GPU-hours, hopsd's state, start estimates."""

from __future__ import annotations

from dataclasses import replace

from hopsd.ledger.records import (
    AllocationReason,
    JobRecord,
    JobState,
    LeaseInfo,
    LrRule,
    PlacementRecord,
    Prediction,
    RoundInfo,
    TagStatus,
)
from hopsd.views.joblist import (
    daemon_state,
    eta_of,
    gpu_hours_by_type,
    job_name,
    job_record,
    reason_of,
    start_in_of,
)

JOB = JobRecord(
    id="7", slurm_job_id=7, user="u", account="a", script_path="", demands=(1,),
    total_samples=1000.0, batch_size=32, model_name="resnet50", params=0.0, lr=None,
    lr_rule=LrRule.NONE, lr_by_demand=None, state=JobState.QUEUED, state_reason="",
    state_changed_at=0.0, submit_time=0.0, first_start_time=None, end_time=None,
    wait_time=0.0, service_gpu_s=0.0, service_norm=0.0, restarts=0, samples_done=0.0,
    estimate_source=None, tag_status=TagStatus.VALID, tag_reason="", current_gpu_type=None,
    current_parts=None, latency_ratio=None, ftf_rho=None, input_problem="", plan_reason="",
    updated_at=0.0,
)  # fmt: skip


def test_name_falls_back_to_the_model_then_the_id() -> None:
    assert job_name(replace(JOB, script_path="/x/train.sh")) == "train.sh"
    assert job_name(JOB) == "resnet50"
    assert job_name(replace(JOB, model_name="")) == "7"


def test_gpu_hours_end_at_the_next_change_or_the_end() -> None:
    done = replace(JOB, state=JobState.DONE, end_time=7200.0)
    steps = [
        PlacementRecord(0.0, AllocationReason.START, "v100", (("n1", 2),), 2),
        PlacementRecord(3600.0, AllocationReason.PREEMPT, None, (), 0),
        PlacementRecord(5400.0, AllocationReason.START, "a100", (("n2", 4),), 4),
    ]
    assert gpu_hours_by_type(done, steps, now=9e9) == {"a100": 2.0, "v100": 2.0}
    assert gpu_hours_by_type(done, [], now=9e9) == {}


def test_daemon_state_from_lease_and_last_round() -> None:
    live = LeaseInfo("hopsd", "h:1", 0.0, 90.0, 120.0)
    shadow = RoundInfo(3, 80.0, True, "hops")
    assert daemon_state(None, None, 100.0).mode == "stopped"
    assert daemon_state(live, shadow, 100.0).mode == "shadow"
    assert daemon_state(live, replace(shadow, shadow=False), 100.0).mode == "running"
    assert daemon_state(live, shadow, 130.0).mode == "stopped"  # lease expired: no heartbeat


def test_start_and_eta_are_the_newest_forecast_as_the_state_allows() -> None:
    """A waiting job shows when the forecast starts it, a job on GPUs when it ends; a
    start already due shows 0, and a state without such a time shows none."""
    waiting = replace(JOB, state=JobState.QUEUED)
    running = replace(JOB, state=JobState.RUNNING)
    said = Prediction(JOB.id, 50.0, "queued", start_at=130.0, end_at=400.0)
    assert start_in_of(waiting, said, 100.0) == 30.0
    assert eta_of(waiting, said, 100.0) is None
    assert eta_of(running, said, 100.0) == 300.0
    assert start_in_of(running, said, 100.0) is None
    assert start_in_of(waiting, said, 200.0) == 0.0
    assert start_in_of(waiting, None, 100.0) is None
    beyond = replace(said, start_at=None, end_at=None)  # past the forecast's horizon
    assert start_in_of(waiting, beyond, 100.0) is None and eta_of(running, beyond, 100.0) is None
    shown = job_record(waiting, 100.0, daemon_state(None, None, 100.0), said)
    assert (shown["start_in_s"], shown["eta_s"]) == (30.0, None)


def test_reasons_for_profiling_finished_and_stopped() -> None:
    stopped = daemon_state(None, None, 0.0)
    live = daemon_state(LeaseInfo("hopsd", "h", 0.0, 0.0, 60.0), None, 1.0)
    profiling = replace(JOB, state=JobState.PROFILING, current_gpu_type="v100",
                        current_parts=(("v100n1", 1),))  # fmt: skip
    assert reason_of(profiling, live) == "profiling on v100 v100n1:1"
    assert reason_of(replace(profiling, current_parts=None), live) == (
        "profiling: waiting for a GPU"
    )
    done = replace(JOB, state=JobState.DONE, plan_reason="running on a100",
                   state_reason="slurm COMPLETED (exit code 0)")  # fmt: skip
    # how it ended, never the planner's last sentence, and no "not running"
    assert reason_of(done, stopped) == "slurm COMPLETED (exit code 0)"
    assert reason_of(replace(JOB, plan_reason="waiting"), stopped) == (
        "hopsd not running (last: waiting)"
    )


def test_a_job_shows_nodes_and_a_reason_only_as_its_state_allows() -> None:
    """A queued job whose row still names GPUs shows none; a running job with no
    recorded reason says where it runs; a waiting job without one says why it waits."""
    live = daemon_state(LeaseInfo("hopsd", "h", 0.0, 0.0, 60.0), None, 1.0)
    stale = replace(JOB, state=JobState.QUEUED, current_gpu_type="k80",
                    current_parts=(("k80n1", 1),), state_reason="profiling over: done")  # fmt: skip
    shown = job_record(stale, 10.0, live)
    assert (shown["gpu_type"], shown["nodes"], shown["gpus"]) == (None, {}, 0)
    assert shown["reason"] == "waiting (profiling over: done)"
    running = replace(stale, state=JobState.RUNNING, current_gpu_type="a100",
                      current_parts=(("a100n1", 2), ("a100n2", 2)))  # fmt: skip
    shown = job_record(running, 10.0, live)
    assert shown["nodes"] == {"a100n1": 2, "a100n2": 2}
    assert shown["reason"] == "running on a100 a100n1:2+a100n2:2"


def test_a_placed_job_that_holds_no_gpus_yet_is_starting_not_running() -> None:
    """The planner says "running on X" of a job it released onto X and "profiling on X" of
    one it sent to profile there; until Slurm starts the run the job holds nothing."""
    live = daemon_state(LeaseInfo("hopsd", "h", 0.0, 0.0, 60.0), None, 1.0)
    placed = replace(JOB, state=JobState.QUEUED, plan_reason="running on v100 v100n1:2")
    assert reason_of(placed, live) == (
        "starting on v100 v100n1:2: released, waiting for Slurm to start its run"
    )
    sent = replace(JOB, state=JobState.PROFILING, plan_reason="profiling on k80 (k80n1)")
    assert reason_of(sent, live) == (
        "starting on k80 (k80n1): released, waiting for Slurm to start a profiling run"
    )
    running = replace(sent, current_gpu_type="k80", current_parts=(("k80n1", 1),))
    assert reason_of(running, live) == "profiling on k80 k80n1:1"  # where it runs, as squeue


def test_a_waiting_job_always_has_a_reason() -> None:
    live = daemon_state(LeaseInfo("hopsd", "h", 0.0, 0.0, 60.0), None, 1.0)
    adopted = replace(JOB, state=JobState.QUEUED, plan_reason="", state_reason="")
    assert reason_of(adopted, live) == "waiting for hopsd's next round"


def test_a_move_or_preemption_under_way_says_the_job_checkpoints_where_it_is() -> None:
    """The planner said "moved to k80 k80n1:1" of a job that still runs on its A100s (its
    notice's grace): it is moving, not moved; once it runs on the k80 the sentence fits."""
    live = daemon_state(LeaseInfo("hopsd", "h", 0.0, 0.0, 60.0), None, 1.0)
    old = replace(JOB, state=JobState.RUNNING, current_gpu_type="a100",
                  current_parts=(("a100n2", 2),), plan_reason="moved to k80 k80n1:1")  # fmt: skip
    assert reason_of(old, live) == (
        "moving to k80 k80n1:1: checkpointing on a100 a100n2:2 before its requeue"
    )
    there = replace(old, current_gpu_type="k80", current_parts=(("k80n1", 1),))
    assert reason_of(there, live) == "moved to k80 k80n1:1"
    going = replace(old, plan_reason="preempted for jobs of higher priority")
    assert reason_of(going, live) == (
        "being preempted for jobs of higher priority: checkpointing on a100 a100n2:2 "
        "before its requeue"
    )


def test_a_profiling_job_says_where_its_run_is_now_not_where_the_last_one_was() -> None:
    live = daemon_state(LeaseInfo("hopsd", "h", 0.0, 0.0, 60.0), None, 1.0)
    moved_on = replace(JOB, state=JobState.PROFILING, current_gpu_type="a100",
                       current_parts=(("a100n1", 1),),
                       plan_reason="profiling on v100 (v100n2)")  # fmt: skip
    assert reason_of(moved_on, live) == "profiling on a100 a100n1:1"
