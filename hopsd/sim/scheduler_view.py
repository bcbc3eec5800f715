"""What the simulated scheduler sees: the core's snapshot of the simulated cluster.

The simulator hands the core the same picture hopsd builds from its ledger: the
queued and running jobs as core jobs, the capacity profiling runs and reserved
GPUs leave, and the profiling jobs as the core's profiling rules see them. The
engine (:mod:`hopsd.sim.engine`) takes its steps from this view; it never shows
the core the simulator's ground truth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from hopsd.core.capacity import headroom, node_sizes, per_type
from hopsd.core.model import Job
from hopsd.core.nodespeed import SpeedLearner
from hopsd.core.profiling import (
    KnownProfile,
    Profilee,
    RunInFlight,
)
from hopsd.core.reserve import landing
from hopsd.core.snapshot import InFlight, Snapshot
from hopsd.core.throughput import PhaseProfile
from hopsd.sim.state import EngineState, JobState


def known_profiles(
    known: Mapping[tuple[str, int], Mapping[str, PhaseProfile]], js: JobState
) -> tuple[KnownProfile, ...]:
    """Profiles of the job's model measured by earlier jobs (at its batch size)."""
    found = known.get((js.spec.model, js.batch_size), {})
    return tuple(KnownProfile(t, p) for t, p in sorted(found.items()))


class SchedulerView(EngineState):
    """Builds the core's snapshot from the engine's state (a mixin of the engine)."""

    speeds: SpeedLearner
    reserved: dict[str, int]
    _limits: dict[str, tuple[tuple[str, int], ...]]
    _core_jobs: dict[str, tuple[tuple[object, ...], Job]]

    def _core_job(self, js: JobState) -> Job:
        """The job as the core sees it; the same object again while nothing it holds changed
        (several steps often fall on one instant, and every step asks for every job)."""
        current = js.config if js.status == "running" else None
        state = (
            js.samples_done,
            js.attained_service,
            js.wait_time,
            current,
            js.batch_size,
            js.restarts,
        )
        cached = self._core_jobs.get(js.spec.job_id)
        if cached is not None and cached[0] == state:
            return cached[1]
        limits = self._limits.get(js.spec.model)
        if limits is None:
            limits = self._limits[js.spec.model] = js.model.limits()
        job = Job(
            id=js.spec.job_id,
            demands=js.spec.demands,
            total_samples=js.spec.total_samples,
            batch_size=js.batch_size,
            params=js.model.params,
            submit_time=js.spec.submit_time,
            user=js.spec.user,
            samples_done=min(js.samples_done, js.spec.total_samples),
            attained_service=js.attained_service,
            wait_time=js.wait_time,
            current=current,
            max_gpus=limits,
            restart_s=self._restart_price(js),
        )
        self._core_jobs[js.spec.job_id] = (state, job)
        return job

    @staticmethod
    def _restart_price(js: JobState) -> float | None:
        """What the planner prices a move of the job at: its model's restart cost (None:
        the prior), or, replaying a live job, what hopsd would have learned of it by now."""
        if js.model.priced_as is not None:
            return js.model.priced_as.price(js.restarts)
        return js.model.restore_s

    def _snapshot(self, pinned: bool) -> Snapshot:
        """What the step plans from: the engine's state, with the node speeds learned so far."""
        self.speeds.refresh(self.store)
        return self._view(pinned)

    def _landing(self) -> tuple[str, ...]:
        """The starts waiting under a notice's grace that may start now, GPUs having come
        free early: the core's rule (:func:`hopsd.core.reserve.landing`) says which, so
        that none takes GPUs in-flight work holds or will take."""
        if all(f.runs_on or f.target is None for f in self.flights.values()):
            return ()
        return landing(self._view(pinned=False))

    def _view(self, pinned: bool) -> Snapshot:
        """The core's snapshot of the engine's state, as it stands."""
        jobs: list[Job] = []
        running: list[str] = []
        profiling: list[JobState] = []
        for js in self.active.values():
            if js.status == "profiling":
                profiling.append(js)
            if js.status not in ("queued", "running") or self._ending(js):
                continue
            job = self._core_job(js)
            if js.status == "running":
                running.append(js.spec.job_id)
                # how long it has held its placement, as hopsd reads its run's start
                job = dataclasses.replace(job, run_elapsed_s=max(self.now - js.config_since, 0.0))
            jobs.append(job)
        return Snapshot(
            now=self.now,
            cluster=self.cluster,
            jobs=tuple(jobs),
            store=self.store,
            pinned=frozenset(running) if pinned else frozenset(),
            capacity=self._left_by_profiling(),
            profiling=tuple(self._profilee(js) for js in profiling),
            in_flight=self._in_flight(),
        )

    def _in_flight(self) -> tuple[InFlight, ...]:
        """The moves, preemptions and starts waiting for a notice's grace, as the core's
        in-flight records: the step plans around them (:mod:`hopsd.core.reserve`)."""
        return tuple(
            InFlight(
                job_id,
                flight.target.parts if flight.target else (),
                flight.runs_on,
                flight.until if flight.runs_on else None,
            )
            for job_id, flight in self.flights.items()
        )

    def _ending(self, js: JobState) -> bool:
        """Trained to its end, not yet seen ended (``seen_after_end_s``): out of every plan,
        its GPUs still held, as hopsd leaves a completing job."""
        return js.trained_at is not None and self.config.seen_after_end_s > 0

    def _left_by_profiling(self) -> dict[str, int]:
        """What the policy may hand out of the nodes profiling runs (or reserved GPUs) use
        (the rest: all)."""
        taken = {n: gpus for n, gpus in self.profiling_used.items() if gpus}
        for node_id, gpus in self.reserved.items():
            taken[node_id] = taken.get(node_id, 0) + gpus
        for js in self.active.values():
            if self._ending(js) and js.config is not None:
                for node_id, gpus in js.config.parts:
                    taken[node_id] = taken.get(node_id, 0) + gpus
        return headroom({n: self.cluster.node(n).gpus for n in taken}, taken)

    def _profilee(self, js: JobState) -> Profilee:
        """A profiling job as the core's profiling rules see it (its runs always start)."""
        run = None
        if js.config is not None:
            cfg = js.config
            run = RunInFlight(cfg.gpu_type, cfg.parts[0][0], js.config_since, True)
        return Profilee(
            js.spec.job_id,
            js.spec.submit_time,
            js.profiling_since,
            frozenset(js.profiled),
            frozenset(),
            run,
            js.profiling_runs,
            self._core_job(js),
            self._known(js),
        )

    def _known(self, js: JobState) -> tuple[KnownProfile, ...]:
        """Profiles of the job's model measured by earlier jobs (at its batch size)."""
        return known_profiles(self.known, js)

    def _usable_idle(self) -> int:
        """Idle GPUs a waiting job could start on: those of every type whose idle GPUs
        hold the smallest minimum demand among the waiting jobs."""
        smallest = min(
            (j.spec.demands[0] for j in self.active.values() if j.status == "queued"),
            default=0,
        )
        if smallest == 0:
            return 0
        idle = per_type(self.cluster, headroom(node_sizes(self.cluster), self.used))
        return sum(n for n in idle.values() if n >= smallest)
