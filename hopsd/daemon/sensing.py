"""Sensing: read what jobs' probes report, check it, and learn from it.

Each job's probe (:mod:`hops_probe`) appends JSON lines to
``<spool>/<slurm job id>.jsonl``, where the spool is hops.conf
``daemon.spool_dir`` or, when that is empty, the job's own working directory
(:mod:`hopsd.daemon.spool`). A report is believed only when

* the file is a regular file (not a link) owned by the job's own user --
  checked on the opened descriptor, so the file cannot be swapped in between,
* the job id in the file name and in every record match,
* the file and each line stay within size limits and every value is sane,
* it comes from the job's current run (Slurm's restart count) on a node the
  job holds now -- lines of an earlier placement still count for progress, but
  are never attributed to the new one.

Anything else is skipped (and logged once per job), never raised.

What is learned:

* ``profile`` records fill the theory layer (``set_profile``) of the GPU type
  the run was on, plus the entity/type rows at one GPU;
* ``run`` records are measurements of the job's per-GPU samples/s where it
  runs, learned by the core's one rule (:mod:`hopsd.core.learning`: EWMA per
  node, the best server of the type for the type layer), as the simulator
  learns them;
* data-time and sync-wait samples accumulate per (job, type) and the
  hit/miss mixture is re-fitted into the theory layer as they come;
* a job that reports only progress (no iteration timings) is measured from
  samples done per wall time, and its estimates are labelled ``progress``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import pwd
import stat
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hopsd.core.fitting import fit_mixture, profile_from_measurements
from hopsd.core.learning import learn
from hopsd.core.model import Cluster, Configuration
from hopsd.daemon.hygiene import SpoolJanitor
from hopsd.daemon.job_reports import (
    MAX_LINE_BYTES,
    CheckpointReport,
    ProfileReport,
    ProgressReport,
    Report,
    RunReport,
    StartReport,
    parse_line,
    parse_progress,
)
from hopsd.daemon.problems import InputProblems
from hopsd.daemon.spool import Spools, UnsafeSpool, read_owned, remove_file, write_file
from hopsd.daemon.spool_audit import SpoolAudit
from hopsd.daemon.spool_budget import MAX_FILE_BYTES, MAX_PROGRESS_BYTES, DirJobs
from hopsd.daemon.spool_reclaim import reclaim_in
from hopsd.daemon.views import ObservedJob
from hopsd.ledger.measurements import MeasurementStore
from hopsd.ledger.records import JobRecord
from hopsd.userdata import (
    UserDataError,
)

log = logging.getLogger("hopsd.sensing")

MAX_READ_BYTES = 1024 * 1024
WINDOW = 512  # data-time samples kept per (job, type) for the mixture fit

UidLookup = Callable[[str], int | None]  # same shape as hopsd.daemon.spool.UidLookup


def system_uid(user: str) -> int | None:
    """The uid of a user name, or None when the system does not know it."""
    try:
        return pwd.getpwnam(user).pw_uid
    except (KeyError, TypeError):
        return None


class ReportReader:
    """Reads new lines of each job's report file, checking ownership and limits.

    Offsets live in memory: a restarted daemon reads the (bounded) file again.
    A file that shrank was started afresh by the probe and is read from the top.
    """

    def __init__(
        self, uid_of: UidLookup = system_uid, problems: InputProblems | None = None
    ) -> None:
        self.uid_of = uid_of
        self.problems = problems if problems is not None else InputProblems()
        self._offsets: dict[int, int] = {}

    def path(self, spool: Path, slurm_id: int) -> Path:
        return spool / f"{slurm_id}.jsonl"

    def exists(self, spool: Path, slurm_id: int) -> bool:
        return self.path(spool, slurm_id).exists()

    def read(
        self, spool: Path, slurm_id: int, user: str, *, per_user: bool = False
    ) -> list[Report]:
        """New believable records of the job (empty when none or the file is refused).

        ``per_user``: ``spool`` is the user's directory of the shared spool, where
        every name is hopsd's to answer for (see :func:`.spool_reclaim.answers_for`).
        """
        path = self.path(spool, slurm_id)
        try:
            info = os.lstat(path)
        except OSError:
            return []
        problem = self._check_file(info, user)
        if problem:
            self.complain(slurm_id, problem)
            return []
        if info.st_size > MAX_FILE_BYTES:
            self._over_quota(spool, slurm_id, info.st_uid, per_user)
            return []
        start = self._offsets.get(slurm_id, 0)
        if info.st_size < start:
            start = 0
        jumped = info.st_size - start > MAX_READ_BYTES
        if jumped:
            start = info.st_size - MAX_READ_BYTES
        chunk = self._read_chunk(path, start, info.st_uid, slurm_id)
        if chunk is None:
            return []
        complete = chunk.rfind(b"\n") + 1
        self._offsets[slurm_id] = start + complete
        return self._parse_lines(chunk[:complete], slurm_id, skip_first=jumped)

    def forget(self, slurm_id: int) -> None:
        self._offsets.pop(slurm_id, None)

    def _check_file(self, info: os.stat_result, user: str) -> str:
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        uid = self.uid_of(user)
        if uid is None:
            return f"owner {user!r} unknown to the system"
        if info.st_uid != uid:
            return f"owned by uid {info.st_uid}, the job's user {user!r} is uid {uid}"
        return ""

    def _over_quota(self, spool: Path, slurm_id: int, uid: int, per_user: bool) -> None:
        """Free a report past its quota while its job runs, and tell the job's owner.

        Emptied in place when it has no other name; else taken out of the spool
        without touching a name elsewhere (:mod:`hopsd.daemon.spool_reclaim`).
        """
        name = self.path(spool, slurm_id).name
        try:
            done = reclaim_in(spool, name, uid, keep_name=True, per_user=per_user)
        except UnsafeSpool as exc:
            self.complain(slurm_id, f"report above its {MAX_FILE_BYTES}-byte quota: {exc}")
            return
        self._offsets.pop(slurm_id, None)
        self.complain(
            slurm_id,
            f"report {done.describe(name)}: above its {MAX_FILE_BYTES}-byte quota; "
            "its records so far were not read",
        )

    def _read_chunk(self, path: Path, start: int, uid: int, slurm_id: int) -> bytes | None:
        """The bytes from ``start``, re-checking link, type and owner on the opened file."""
        try:
            return read_owned(path, uid, MAX_READ_BYTES, start)[0]
        except UnsafeSpool as exc:
            self.complain(slurm_id, str(exc))
            return None
        except OSError:
            return None

    def _parse_lines(self, data: bytes, slurm_id: int, skip_first: bool) -> list[Report]:
        out: list[Report] = []
        lines = data.split(b"\n")
        if skip_first:
            lines = lines[1:]  # cut in the middle by the read limit
        for line in lines:
            if not line.strip():
                continue
            if len(line) > MAX_LINE_BYTES:
                self.complain(slurm_id, f"line of {len(line)} bytes skipped")
                continue
            try:
                out.append(parse_line(line, slurm_id))
            except UserDataError as exc:
                self.complain(slurm_id, f"record skipped: {exc}")
        return out

    def complain(self, slurm_id: int, problem: str) -> None:
        """Note a refused input: logged once per job and cause, counted, kept for the job's row."""
        self.problems.note(slurm_id, problem)


@dataclass
class _Progress:
    run: int
    at: float
    samples_done: float


class Sensing:
    """The daemon's memory of job reports between ticks (windows, offsets, flags).

    ``spool`` is the directory of report and mode files (hops.conf
    ``daemon.spool_dir``); None means each job's own working directory, as
    reported by Slurm and passed in each tick through :meth:`note`.
    """

    def __init__(
        self,
        spool: Path | None,
        uid_of: UidLookup = system_uid,
        problems: InputProblems | None = None,
    ) -> None:
        self.problems = problems if problems is not None else InputProblems()
        self.spools = Spools(spool, self.problems, uid_of)
        self.uid_of = uid_of
        self.reader = ReportReader(uid_of, self.problems)
        self.janitor = SpoolJanitor(uid_of)
        self.audit = SpoolAudit(uid_of, self.problems)
        self.fresh_profiles: dict[str, str] = {}
        self.reported: set[str] = set()
        self.progress_only: set[str] = set()
        self._windows: dict[tuple[str, str], tuple[deque[float], deque[float]]] = {}
        self._progress: dict[str, _Progress] = {}
        # the time of each job's latest checkpoint report (hops's notice waits for one)
        self.checkpoints: dict[int, float] = {}
        # progress reported beyond a job's claimed size, until reconcile takes it
        self.beyond: dict[str, float] = {}

    @property
    def spool(self) -> Path | None:
        """The shared spool directory, None when each job uses its working directory."""
        return self.spools.shared

    def note(self, jobs: Iterable[ObservedJob]) -> None:
        """Learn this tick's working directories (used when there is no shared spool)."""
        self.spools.note(jobs)

    def has_report_file(self, slurm_id: int) -> bool:
        spool = self.spools.of(slurm_id)
        return spool is not None and self.reader.exists(spool.path, slurm_id)

    def read_progress(self, slurm_id: int, user: str) -> ProgressReport | None:
        """The single progress file (``<id>.progress.json``) of a job without the probe.

        Held to the same rules as the probe's reports: a regular file owned by
        the job's user, small, read without following links, and its content
        checked by :func:`parse_progress`. None when absent or refused.
        """
        spool = self.spools.of(slurm_id)
        uid = self.uid_of(user)
        if spool is None or uid is None:
            return None
        name = f"{slurm_id}.progress.json"
        try:
            data, size = read_owned(spool.path / name, uid, MAX_PROGRESS_BYTES + 1)
            if size > MAX_PROGRESS_BYTES:
                done = reclaim_in(spool.path, name, uid, keep_name=True, per_user=spool.per_user)
                raise UnsafeSpool(
                    f"{done.describe(name)}: above its {MAX_PROGRESS_BYTES}-byte quota"
                )
            return parse_progress(data)
        except (UnsafeSpool, UserDataError) as exc:
            self.problems.note(slurm_id, f"progress file ignored: {exc}", "progress")
            return None
        except OSError:
            return None

    def final_samples(self, row: JobRecord, slurm_id: int) -> float | None:
        """Samples done in the probe's last word on a job that ended (None: it said none).

        The probe's final flush is written as the job ends, after the last tick
        that saw it run: read it then, or a completed job shows the progress of
        its last report before the end.
        """
        spool = self.spools.of(slurm_id)
        if spool is None:
            return None
        reports = self.reader.read(spool.path, slurm_id, row.user, per_user=spool.per_user)
        said = [r.samples_done for r in reports]
        done = [s for s in said if s is not None]
        return min(max(done), row.total_samples) if done else None

    def write_mode(self, slurm_id: int, user: str, body: dict[str, Any]) -> str:
        """Write the job's mode file; the reason it was not written, or "" when it was.

        In a job's working directory the directory must belong to the job's user
        (see :mod:`hopsd.daemon.spool`); a job whose directory is unknown or
        unsafe is simply not profiled.
        """
        spool = self.spools.of(slurm_id)
        if spool is None:
            return "the job's working directory is unknown or not an absolute path"
        owner = None
        if spool.own:
            owner = self.uid_of(user)
            if owner is None:
                return f"user {user!r} unknown to the system"
        try:
            data = json.dumps(body).encode()
            write_file(spool.path, f"{slurm_id}.mode", data, owner, give=not spool.per_user)
        except OSError as exc:
            return str(exc)
        return ""

    def remove_mode(self, slurm_id: int) -> None:
        spool = self.spools.of(slurm_id)
        if spool is not None:
            remove_file(spool.path, f"{slurm_id}.mode")

    def ingest(
        self,
        store: MeasurementStore,
        row: JobRecord,
        seen: ObservedJob,
        config: Configuration | None,
        cluster: Cluster,
    ) -> bool:
        """Fold a job's new reports into the ledger; False when it has no report file."""
        spool = self.spools.of(seen.slurm_id)
        if spool is None or not self.reader.exists(spool.path, seen.slurm_id):
            return False
        reports = self.reader.read(spool.path, seen.slurm_id, row.user, per_user=spool.per_user)
        for report in reports:
            self.reported.add(row.id)
            if report.samples_done is not None:
                store.note_samples_done(row.id, min(report.samples_done, row.total_samples))
                self.note_beyond(row, report.samples_done)
            if isinstance(report, CheckpointReport | StartReport):
                self._note_restart_cost(store, row, seen, report)
                continue
            if config is None or report.run != seen.restarts or report.node not in config.node_ids:
                continue
            if isinstance(report, ProfileReport):
                self._learn_profile(store, row, report, config, cluster)
            else:
                self._learn_run(store, row, report, config, cluster)
        return True

    def _note_restart_cost(
        self,
        store: MeasurementStore,
        row: JobRecord,
        seen: ObservedJob,
        report: CheckpointReport | StartReport,
    ) -> None:
        """Keep the job's checkpoint and start-up times (the latest of each), its restart cost."""
        if isinstance(report, CheckpointReport):
            store.note_restart_cost(row.id, checkpoint_s=report.seconds)
            if report.run == seen.restarts:
                self.checkpoints[seen.slurm_id] = report.at
        else:
            store.note_restart_cost(row.id, startup_s=report.startup_s)
            if report.run > 0:
                store.note_whole_restart(row.id, report.run, report.at)

    def note_beyond(self, row: JobRecord, samples_done: float) -> None:
        """Remember progress reported beyond the job's claimed size (kept at the claim in
        the ledger): evidence against the claim, taken by :meth:`take_beyond`."""
        if samples_done > row.total_samples:
            self.beyond[row.id] = max(self.beyond.get(row.id, 0.0), samples_done)

    def take_beyond(self, job_id: str) -> float | None:
        """The most samples done a job reported beyond its claim since last asked."""
        return self.beyond.pop(job_id, None)

    def checkpointed_since(self, slurm_id: int, since: float) -> bool:
        """The job's current run reported a checkpoint at or after ``since`` (epoch seconds)."""
        at = self.checkpoints.get(slurm_id)
        return at is not None and at >= since

    def ended(self, slurm_id: int, user: str, now: float) -> None:
        """A job ended: its spool files are removed after the retention (:mod:`.hygiene`);
        what is kept of it in memory goes with :meth:`forget`."""
        self.janitor.ended(slurm_id, self.spools.of(slurm_id), user, now)

    def clean(self, now: float, retention_s: float, active: Collection[int]) -> None:
        """Remove the spool files of jobs whose retention is over, and hold each user's
        directory of the shared spool to its quotas (:mod:`.spool_audit`); never raises
        for a file."""
        try:
            self.janitor.sweep(now, retention_s, active)
            if self.spools.shared is not None:
                self.janitor.scan(self.spools.user_dirs(), now, retention_s, active)
                self.audit.run(self.spools.user_dirs(), self.dir_jobs())
        except OSError as exc:
            log.warning("event=spool-clean-failed error=%r", str(exc))

    def dir_jobs(self) -> dict[str, DirJobs]:
        """Each user's jobs as their directory in the shared spool sees them."""
        ended = self.janitor.kept()
        out = {
            user: DirJobs(frozenset(running), frozenset(pending), frozenset(ended.pop(user, ())))
            for user, (running, pending) in self.spools.users_jobs().items()
        }
        out.update((user, DirJobs(ended=frozenset(ids))) for user, ids in ended.items())
        return out

    def forget(self, job_id: str, slurm_id: int) -> None:
        """Drop in-memory state of a job that ended: hopsd runs for weeks, and what it
        kept of every job that ever passed would grow without bound."""
        self.reader.forget(slurm_id)
        self.problems.forget(slurm_id)
        self._progress.pop(job_id, None)
        self.fresh_profiles.pop(job_id, None)
        self.reported.discard(job_id)
        self.progress_only.discard(job_id)
        self.beyond.pop(job_id, None)
        self.checkpoints.pop(slurm_id, None)
        for key in [k for k in self._windows if k[0] == job_id]:
            del self._windows[key]

    # -- learning ------------------------------------------------------------------------

    def _learn_profile(
        self,
        store: MeasurementStore,
        row: JobRecord,
        report: ProfileReport,
        config: Configuration,
        cluster: Cluster,
    ) -> None:
        profile = profile_from_measurements(report.means, report.t_d, report.t_w)
        store.set_profile(row.id, config.gpu_type, profile, report.iterations)
        data, wait = self._window(row.id, config.gpu_type)
        data.extend(report.t_d)
        wait.extend(report.t_w)
        self.fresh_profiles[row.id] = config.gpu_type
        if report.samples_per_iter > 0:
            per_gpu = report.samples_per_iter / report.means.t_iter / config.total_gpus
            self._measured(store, row, config, cluster, per_gpu, report.samples_per_iter)
        log.info(
            "event=profiled job=%s gpu_type=%s node=%s iterations=%d pattern=%d t_iter=%.4g",
            row.id,
            config.gpu_type,
            report.node,
            report.iterations,
            profile.pattern,
            report.means.t_iter,
        )

    def _learn_run(
        self,
        store: MeasurementStore,
        row: JobRecord,
        report: RunReport,
        config: Configuration,
        cluster: Cluster,
    ) -> None:
        if report.iterations > 0 and report.samples > 0 and report.seconds > 0:
            per_gpu = report.samples / report.seconds / config.total_gpus
            self._measured(store, row, config, cluster, per_gpu, report.samples)
            self.progress_only.discard(row.id)
            store.note_estimate_source(row.id, "entity")
            self._refit(store, row.id, config.gpu_type, report)
            return
        if report.samples_done is None:
            return
        last = self._progress.get(row.id)
        self._progress[row.id] = _Progress(report.run, report.at, report.samples_done)
        if last is None or last.run != report.run or report.at <= last.at:
            return
        gained = report.samples_done - last.samples_done
        if gained > 0:
            per_gpu = gained / (report.at - last.at) / config.total_gpus
            self._measured(store, row, config, cluster, per_gpu, gained)
            self.progress_only.add(row.id)
            store.note_estimate_source(row.id, "progress")

    def _window(self, job_id: str, gpu_type: str) -> tuple[deque[float], deque[float]]:
        key = (job_id, gpu_type)
        if key not in self._windows:
            self._windows[key] = (deque(maxlen=WINDOW), deque(maxlen=WINDOW))
        return self._windows[key]

    def _refit(self, store: MeasurementStore, job_id: str, gpu_type: str, rep: RunReport) -> None:
        """Grow the data-time history and re-fit the theory layer's mixtures from it."""
        data, wait = self._window(job_id, gpu_type)
        data.extend(rep.t_d)
        wait.extend(rep.t_w)
        iterations = store.profile_iterations(job_id, gpu_type)
        if iterations is None or iterations <= 0 or not rep.t_d:
            return
        current = store.profile(job_id, gpu_type)
        if current is None:
            return
        refitted = replace(
            current,
            data=fit_mixture(list(data)),
            sync_wait=fit_mixture(list(wait)) if wait else current.sync_wait,
        )
        store.set_profile(job_id, gpu_type, refitted, iterations)

    def _measured(
        self,
        store: MeasurementStore,
        row: JobRecord,
        config: Configuration,
        cluster: Cluster,
        per_gpu: float,
        samples: float,
    ) -> None:
        if not (math.isfinite(per_gpu) and per_gpu > 0):
            return
        for update in learn(store, row.id, config, cluster, per_gpu):
            store.put_learned(row.id, update, samples)
