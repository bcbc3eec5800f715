"""Enacting decisions on the simulated cluster: plans and profiling runs.

Where hopsd turns a plan into Slurm requeues and releases, the simulator books
GPUs on its nodes, prices restarts and counts preemptions and moves. Booking
checks that no node hands out more GPUs than it has, whatever the policy did.
"""

from __future__ import annotations

from hopsd.core.accounting import RunEnd, restarts_after
from hopsd.core.model import Cluster, Configuration, Plan
from hopsd.core.policies import Policy
from hopsd.core.profiling import (
    ProfilingDecision,
    derived_profiles,
)
from hopsd.core.settings import Settings
from hopsd.core.throughput import InMemoryThroughputStore, PhaseProfile
from hopsd.sim.engine_config import SimulationError
from hopsd.sim.scheduler_view import known_profiles
from hopsd.sim.state import JobState
from hopsd.sim.truth import GroundTruth


class PlanEnactor:
    """Applies the core's plans and profiling decisions to the engine's state (a mixin of
    the engine)."""

    cluster: Cluster
    truth: GroundTruth
    policy: Policy
    settings: Settings
    now: float
    store: InMemoryThroughputStore
    active: dict[str, JobState]
    by_id: dict[str, JobState]
    used: dict[str, int]
    profiling_used: dict[str, int]
    known: dict[tuple[str, int], dict[str, PhaseProfile]]
    preemptions: int
    moves: int
    unmentioned: int

    def _apply_profiling(self, decision: ProfilingDecision) -> bool:
        """Enact the profiling queue's decision on the simulated cluster; True if a run stopped."""
        for job_id, _ in decision.stop:
            js = self.by_id[job_id]
            self._release_profiling(js)
            js.restarts = restarts_after(js.restarts, RunEnd.REQUEUED)
        for job_id, _ in decision.hold:
            js = self.by_id[job_id]
            self._release_profiling(js)
            js.restarts = restarts_after(js.restarts, RunEnd.UNSTARTED)
        for job_id, _ in decision.finish:
            js = self.by_id[job_id]
            self._release_profiling(js)
            js.status = "queued"
            self._derive(js)
        for run in decision.start:
            js = self.by_id[run.job_id]
            cfg = Configuration(run.gpu_type, ((run.node, 1),))
            self.profiling_used[run.node] += 1
            self._occupy(js, cfg, real=False)
            js.penalty_until = self.now + js.model.launch_s  # each run launches first
            js.profiling_runs += 1
            js.has_run = True  # its first real start is a restart
        return bool(decision.stop)

    def _release_profiling(self, js: JobState) -> None:
        if js.config is None:
            return
        for node_id, gpus in js.config.parts:
            self.profiling_used[node_id] -= gpus
        self._release(js)

    def _derive(self, js: JobState) -> None:
        """Profiles of the types a job was not profiled on: its model's known ones, else
        scaled from a measured one (the core's rule, as hopsd writes them)."""
        own = {t: p for t in js.profiled if (p := self.store.profile(js.spec.job_id, t))}
        known = known_profiles(self.known, js)
        for gpu_type, profile in derived_profiles(self.cluster, own, known).items():
            self.store.set_profile(js.spec.job_id, gpu_type, profile)

    def _release(self, job: JobState) -> None:
        if job.config is None:
            return
        for node_id, gpus in job.config.parts:
            self.used[node_id] -= gpus
            assert self.used[node_id] >= 0, f"node {node_id} released below zero"
        job.config = None
        job.rate = 0.0

    def _occupy(self, job: JobState, cfg: Configuration, *, real: bool = True) -> None:
        for node_id, gpus in cfg.parts:
            self.used[node_id] += gpus
            cap = self.cluster.node(node_id).gpus
            if self.used[node_id] > cap:
                raise SimulationError(
                    f"policy {self.policy.name!r} double-booked node {node_id!r}: "
                    f"{self.used[node_id]} GPUs of {cap} handed out"
                )
        job.config = cfg
        job.rate = self.truth.throughput(job.spec.model, cfg, job.batch_size)
        job.config_since = self.now
        if not real:
            return  # a profiling run: not the job's start
        job.types_used.add(cfg.gpu_type)
        if job.first_start is None:
            job.first_start = self.now
            job.first_config = cfg

    def _restart_cost(self, job: JobState) -> float:
        """Seconds without progress after a move or restart: the model's own, else the penalty."""
        own = job.model.restore_s
        return own if own is not None else self.settings.restart_penalty_s

    def _apply(self, plan: Plan) -> None:
        """Enact a validated plan on the simulated cluster (the step checked its rules)."""
        mentioned = {a.job_id for a in (*plan.keep, *plan.move)} | set(plan.preempt)
        self.unmentioned += sum(
            1
            for j in self.active.values()
            if j.status == "running" and j.spec.job_id not in mentioned
        )
        for job_id in plan.preempt:
            js = self.by_id[job_id]
            self._release(js)
            js.status = "queued"
            js.restarts = restarts_after(js.restarts, RunEnd.REQUEUED)
            self.preemptions += 1
        for a in plan.move:
            self._release(self.by_id[a.job_id])
        for a in plan.move:
            js = self.by_id[a.job_id]
            self._occupy(js, a.config)
            js.penalty_until = self.now + self._restart_cost(js)
            js.restarts = restarts_after(js.restarts, RunEnd.REQUEUED)
            self.moves += 1
        for a in plan.start:
            js = self.by_id[a.job_id]
            self._occupy(js, a.config)
            js.status = "running"
            if js.has_run:
                js.penalty_until = self.now + self._restart_cost(js)
            elif js.model.launch_s > 0:
                js.penalty_until = self.now + js.model.launch_s  # launch until it trains
            js.has_run = True
