"""Enacting decisions on the simulated cluster: plans and profiling runs.

Where hopsd turns a plan into Slurm requeues and releases, the simulator books
GPUs on its nodes, prices restarts and counts preemptions and moves. Booking
checks that no node hands out more GPUs than it has, whatever the policy did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hopsd.core.accounting import RunEnd, restarts_after
from hopsd.core.act import Act
from hopsd.core.model import Assignment, Configuration, Plan
from hopsd.core.policies import Policy
from hopsd.core.profiling import (
    ProfilingDecision,
    derived_profiles,
)
from hopsd.core.settings import Settings
from hopsd.sim.engine_config import SimulationError
from hopsd.sim.scheduler_view import known_profiles
from hopsd.sim.state import EngineState, Flight, JobState
from hopsd.sim.truth import GroundTruth


class PlanEnactor(EngineState):
    """Applies the core's plans and profiling decisions to the engine's state (a mixin of
    the engine)."""

    truth: GroundTruth
    policy: Policy
    settings: Settings
    by_id: dict[str, JobState]
    preemptions: int
    moves: int
    unmentioned: int
    # (instant, job, action) of every Slurm action hopsd would take: notice, requeue, release
    events: list[tuple[float, str, str]]

    def _apply_profiling(self, decision: ProfilingDecision) -> bool:
        """Enact the profiling queue's decision on the simulated cluster; True if a run stopped."""
        for job_id, _ in decision.stop:
            js = self.by_id[job_id]
            self._release_profiling(js)
            js.restarts = restarts_after(js.restarts, RunEnd.REQUEUED)
            self._log(job_id, "requeue")
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
            self._log(run.job_id, "release")
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

    def _log(self, job_id: str, action: str) -> None:
        """One Slurm action as hopsd would take it: notice, requeue or release (a start)."""
        self.events.append((self.now, job_id, action))

    def _apply(self, plan: Plan, actions: Sequence[Act] = ()) -> None:
        """Enact a validated plan on the simulated cluster (the step checked its rules).

        Moves and preemptions the step's act stage gives a notice (``actions``;
        only with a notice grace) are taken when it is over, as are starts onto
        GPUs their jobs still hold (:meth:`_give_notice`).
        """
        mentioned = {a.job_id for a in (*plan.keep, *plan.move)} | set(plan.preempt)
        self.unmentioned += sum(
            1
            for j in self.active.values()
            if j.status == "running"
            and j.spec.job_id not in mentioned
            and j.spec.job_id not in self.flights
        )
        heard = {a.job_id for a in actions if a.notice}
        if self.config.notice_grace_s > 0 and heard:
            plan = self._give_notice(plan, self.now + self.config.notice_grace_s, heard)
        for job_id in plan.preempt:
            self._requeue(self.by_id[job_id], queued=True)
        for a in plan.move:
            self._requeue(self.by_id[a.job_id], queued=False)
        for a in plan.move:
            self._place(self.by_id[a.job_id], a.config, moved=True)
        for a in plan.start:
            self._place(self.by_id[a.job_id], a.config, moved=False)

    def _give_notice(self, plan: Plan, until: float, heard: set[str]) -> Plan:
        """Notice to the moved or preempted jobs in ``heard``; what the plan does now is left.

        Each runs on until ``until`` and is then requeued; a move's target waits
        for it reserved. A start onto GPUs a noticed job still holds is released
        now and starts once they are free.
        """
        free = {n: self.cluster.node(n).gpus - used for n, used in self.used.items()}
        for job_id in plan.preempt:
            if job_id in heard:
                self.flights[job_id] = Flight(until, None, True)
            else:
                self._add(free, self.by_id[job_id].config, 1)
        for a in plan.move:
            if a.job_id in heard:
                self.flights[a.job_id] = Flight(until, a.config, True)
            else:
                self._add(free, self.by_id[a.job_id].config, 1)
                self._add(free, a.config, -1)
        for flight in self.flights.values():
            self._add(free, flight.target, -1)
        now: list[Assignment] = []
        for a in plan.start:
            if all(free[n] >= g for n, g in a.config.parts):
                self._add(free, a.config, -1)
                now.append(a)
            else:  # released now, as hopsd releases it; Slurm starts it once its GPUs are free
                self.flights[a.job_id] = Flight(until, a.config, False)
                self._log(a.job_id, "release")
        for job_id in (*(a.job_id for a in plan.move), *plan.preempt):  # hopsd's order
            if job_id in heard:
                self._log(job_id, "notice")
        return dataclasses.replace(
            plan,
            preempt=tuple(j for j in plan.preempt if j not in heard),
            move=tuple(a for a in plan.move if a.job_id not in heard),
            start=tuple(now),
        )

    @staticmethod
    def _add(free: dict[str, int], cfg: Configuration | None, sign: int) -> None:
        for node_id, gpus in cfg.parts if cfg is not None else ():
            free[node_id] += sign * gpus

    def _end_graces(self) -> bool:
        """Take the requeues and placements whose notice's grace is over, in plan order:
        every requeue first, so a placement finds the GPUs its plan freed for it; and
        start a waiting start whose GPUs came free earlier (their job ended), where
        the core's reserve rule lets it (:meth:`_landing`).
        True when GPUs changed hands (the step plans again)."""
        due = [(i, f) for i, f in self.flights.items() if f.until <= self.now + 1e-6]
        for job_id, flight in due:
            js = self.by_id[job_id]
            if flight.runs_on and js.config is not None:
                self._requeue(js, queued=flight.target is None)
        for job_id, flight in due:
            del self.flights[job_id]
            if flight.target is not None:
                js = self.by_id[job_id]
                self._place(js, flight.target, moved=flight.runs_on, logged=not flight.runs_on)
        early = self._landing()  # never GPUs other in-flight work holds or will take
        for job_id in early:
            target = self.flights.pop(job_id).target
            assert target is not None
            self._place(self.by_id[job_id], target, moved=False, logged=True)
        return bool(due or early)

    def _requeue(self, js: JobState, *, queued: bool) -> None:
        """The job leaves its GPUs to run again (a move's placement follows at once)."""
        self._release(js)
        js.restarts = restarts_after(js.restarts, RunEnd.REQUEUED)
        self._log(js.spec.job_id, "requeue")
        if queued:
            js.status = "queued"
            self.preemptions += 1

    def _place(
        self, js: JobState, cfg: Configuration, *, moved: bool, logged: bool = False
    ) -> None:
        """A (re)start of the job on ``cfg``: a moved job restarts, a start launches.

        ``logged``: its release was logged when it was decided (a start waiting
        for GPUs a noticed job still held, released at once as hopsd does)."""
        self._occupy(js, cfg)
        if not logged:
            self._log(js.spec.job_id, "release")
        if moved:
            js.penalty_until = self.now + self._restart_cost(js)
            self.moves += 1
            return
        js.status = "running"
        if js.has_run:
            js.penalty_until = self.now + self._restart_cost(js)
        elif js.model.launch_s > 0:
            js.penalty_until = self.now + js.model.launch_s  # launch until it trains
        js.has_run = True
