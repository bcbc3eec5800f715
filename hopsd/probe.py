"""The job-side probe of hops: per-phase timings and progress, reported to hopsd.

Dependency-free on purpose (standard library only, nothing else of hopsd), so any
training script can import it whatever its framework::

    from hopsd.probe import Probe

    probe = Probe()
    for step in range(steps):
        with probe.iteration(samples=global_batch) as it:
            with it.phase("data"):
                batch = next(loader)
            with it.phase("forward"):
                loss = model(batch)
            with it.phase("backward"):
                loss.backward()
            with it.phase("sync"):          # optional: time spent waiting for peers
                wait_for_allreduce()
            with it.phase("update"):
                optimizer.step()
        probe.progress(samples_done)         # optional: absolute progress
    probe.close()

A data loader that loads in the background may call ``probe.data_time(seconds)``
with the real load time of each batch; the ``data`` phase in the loop then only
measures the wait, and hops can tell an overlapped loader (pattern 1) from a
serial one (pattern 2).

Two modes, chosen by hopsd (see :func:`resolve_mode`):

* ``profile`` -- time every phase of ``HOPS_PROBE_ITERATIONS`` iterations (after
  ``HOPS_PROBE_WARMUP`` warm-up ones), write one ``profile`` record, then carry
  on in running mode. The job is never stopped by the probe: hopsd requeues it
  when it has read the record, and the job resumes from its own checkpoint as
  after any preemption. Nothing is lost if hopsd is slow to react.
* ``run`` -- keep only what is cheap: samples, iteration count, data time and
  sync wait (a bounded sample of them), flushed as one ``run`` record at most
  every ``HOPS_PROBE_FLUSH_S`` seconds.

Records are JSON lines appended to ``<spool>/<job id>.jsonl`` where the spool is
``$HOPS_SPOOL_DIR`` or the job's working directory. Only the rank-0 process of
a multi-process job writes; ``samples`` should count the whole job's samples
per iteration. The probe never raises into the training loop: I/O errors are
counted and otherwise ignored.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
PHASES = ("data", "forward", "backward", "update", "sync")
_ALIASES = {"sync_wait": "sync", "wait": "sync", "load": "data"}
MAX_FILE_BYTES = 4 * 1024 * 1024  # the probe starts the file afresh beyond this
MAX_SAMPLES_PER_RECORD = 128  # data-time / sync-wait samples kept per run record
MAX_PROFILE_ITERATIONS = 500
_DATA, _FWD, _BWD, _UPD, _SYNC = range(5)


def _env_int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(env.get(name, "") or default)
    except ValueError:
        return default
    return min(max(value, low), high)


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


def _rank(env: Mapping[str, str]) -> int:
    for name in ("RANK", "SLURM_PROCID"):
        raw = env.get(name, "")
        if raw.isdigit():
            return int(raw)
    return 0


def read_mode_file(path: Path, run: int) -> dict[str, Any] | None:
    """The control hopsd left for this job, if it is meant for this very run.

    ``{"mode": "profile", "iterations": 20, "run": 1}``: ``run`` is the restart
    count the job will have when hopsd releases it, so a file left from an earlier
    placement never puts a later run into profiling.
    """
    try:
        if path.stat().st_size > 4096:
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("run") != run:
        return None
    return data


def resolve_mode(env: Mapping[str, str], spool: Path, job_id: str, run: int) -> tuple[str, int]:
    """(mode, profiling iterations): the mode file wins over ``HOPS_PROBE_MODE``."""
    mode = env.get("HOPS_PROBE_MODE", "run").strip().lower() or "run"
    iterations = _env_int(env, "HOPS_PROBE_ITERATIONS", 20, 1, MAX_PROFILE_ITERATIONS)
    control = read_mode_file(spool / f"{job_id}.mode", run)
    if control is not None:
        mode = str(control.get("mode", mode)).lower()
        raw = control.get("iterations")
        if isinstance(raw, int) and not isinstance(raw, bool):
            iterations = min(max(raw, 1), MAX_PROFILE_ITERATIONS)
    if mode not in ("profile", "run", "off"):
        mode = "run"
    return mode, iterations


class _NullPhase:
    """What ``phase()`` returns for phases running mode does not time: costs nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NULL = _NullPhase()


class _Phase:
    __slots__ = ("_clock", "_index", "_iteration", "_t0")

    def __init__(self, iteration: Iteration, index: int) -> None:
        self._iteration = iteration
        self._index = index
        self._clock = iteration._clock
        self._t0 = 0.0

    def __enter__(self) -> None:
        self._t0 = self._clock()

    def __exit__(self, *exc: object) -> None:
        self._iteration.times[self._index] += self._clock() - self._t0


class Iteration:
    """One training iteration; reused by the probe (iterations never nest)."""

    __slots__ = ("_clock", "_phases", "_probe", "_start", "samples", "times")

    def __init__(self, probe: Probe, clock: Callable[[], float]) -> None:
        self._probe = probe
        self._clock = clock
        self.samples = 0.0
        self.times = [0.0] * len(PHASES)
        self._start = 0.0
        self._phases = {name: _Phase(self, i) for i, name in enumerate(PHASES)}
        for alias, name in _ALIASES.items():
            self._phases[alias] = self._phases[name]

    def __enter__(self) -> Iteration:
        times = self.times
        times[0] = times[1] = times[2] = times[3] = times[4] = 0.0
        self._start = self._clock()
        return self

    def __exit__(self, *exc: object) -> None:
        self._probe._end_iteration(self, self._clock() - self._start)

    def phase(self, name: str) -> _Phase | _NullPhase:
        """Time one phase (data, forward, backward, update, sync); unknown names cost nothing."""
        if not self._probe._all_phases and name not in ("data", "sync", "load", "wait"):
            return _NULL
        return self._phases.get(name, _NULL)


class Probe:
    """Measures a training loop and reports to hopsd; see the module docstring.

    ``environ``, ``clock`` (monotonic seconds) and ``wall`` (epoch seconds) are
    injectable so tests can drive the probe without sleeping.
    """

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        wall: Callable[[], float] = time.time,
    ) -> None:
        env = os.environ if environ is None else environ
        self.job_id = env.get("HOPS_JOB_ID") or env.get("SLURM_JOB_ID") or "local"
        self.spool = Path(env.get("HOPS_SPOOL_DIR") or os.getcwd())
        self.path = self.spool / f"{self.job_id}.jsonl"
        self.run = _env_int(env, "SLURM_RESTART_COUNT", 0, 0, 1_000_000)
        self.node = env.get("SLURMD_NODENAME") or socket.gethostname()
        self.flush_s = _env_float(env, "HOPS_PROBE_FLUSH_S", 5.0)
        self.warmup = _env_int(env, "HOPS_PROBE_WARMUP", 2, 0, 100)
        mode, self.iterations = resolve_mode(env, self.spool, self.job_id, self.run)
        self.writer = _rank(env) == 0 and mode != "off"
        self.mode = mode
        self.errors = 0
        self.profiled = False
        self._clock = clock
        self._wall = wall
        self._all_phases = mode == "profile"
        self._iteration = Iteration(self, clock)
        self._seq = 0
        self._seen = 0
        self._samples_done: float | None = None
        self._profile_rows: list[tuple[float, ...]] = []
        self._loader_times: list[float] = []
        self._interval_start: float | None = None
        self._last_flush = 0.0
        self._iters = 0
        self._samples = 0.0
        self._busy = 0.0
        self._data: list[float] = []
        self._sync: list[float] = []
        self._data_sum = 0.0
        self._sync_sum = 0.0
        self._reset_interval(None)

    # -- the loop-facing API -----------------------------------------------------------

    def iteration(self, samples: float = 0.0) -> Iteration:
        """Context manager around one iteration that processed ``samples`` samples."""
        it = self._iteration
        it.samples = samples
        return it

    def progress(self, samples_done: float) -> None:
        """Absolute samples done so far (reported with the next record)."""
        self._samples_done = float(samples_done)
        if self._interval_start is None:
            self._interval_start = self._clock()
        if self._clock() - self._last_flush >= self.flush_s:
            self.flush()

    def data_time(self, seconds: float) -> None:
        """The real load time of one batch, from a background loader (thread-safe append)."""
        buf = self._loader_times
        if len(buf) < 4 * MAX_SAMPLES_PER_RECORD:
            buf.append(float(seconds))

    def flush(self) -> None:
        """Write the running-mode record of the interval since the last flush."""
        now = self._clock()
        start = self._interval_start
        if self.mode == "profile" or start is None:
            self._last_flush = now
            return
        seconds = max(now - start, 0.0)
        loader = self._take_loader_times()
        record = {
            "kind": "run",
            "iterations": self._iters,
            "samples": self._samples,
            "seconds": round(seconds, 6),
            "busy_s": round(self._busy, 6),
            "t_d": _rounded(loader or self._data),
            "t_w": _rounded(self._sync),
            "t_d_sum": round(self._data_sum, 6),
            "t_w_sum": round(self._sync_sum, 6),
            "loader": bool(loader),
        }
        if self._iters or self._samples_done is not None:
            self._write(record)
        self._reset_interval(now)

    def close(self) -> None:
        """Flush what is left; call at the end of training (idempotent)."""
        if self.mode == "run":
            self.flush()

    # -- internals ------------------------------------------------------------------

    def _reset_interval(self, start: float | None) -> None:
        self._interval_start = start
        self._last_flush = start if start is not None else self._clock()
        self._iters = 0
        self._samples = 0.0
        self._busy = 0.0
        self._data = []
        self._sync = []
        self._data_sum = 0.0
        self._sync_sum = 0.0

    def _take_loader_times(self) -> list[float]:
        taken, self._loader_times = self._loader_times, []
        return taken[-MAX_SAMPLES_PER_RECORD:]

    def _end_iteration(self, it: Iteration, elapsed: float) -> None:
        if self.mode == "profile":
            self._profile_step(it, elapsed)
            return
        if self._interval_start is None:
            started = self._clock() - elapsed
            self._interval_start = started
            self._last_flush = started
        self._iters += 1
        self._samples += it.samples
        self._busy += elapsed
        d, w = it.times[_DATA], it.times[_SYNC]
        self._data_sum += d
        self._sync_sum += w
        if len(self._data) < MAX_SAMPLES_PER_RECORD:
            self._data.append(d)
            self._sync.append(w)
        else:
            slot = self._iters % MAX_SAMPLES_PER_RECORD
            self._data[slot] = d
            self._sync[slot] = w
        if self._clock() - self._last_flush >= self.flush_s:
            self.flush()

    def _profile_step(self, it: Iteration, elapsed: float) -> None:
        self._seen += 1
        if self._seen <= self.warmup:
            self._loader_times.clear()
            return
        self._profile_rows.append((elapsed, it.samples, *it.times))
        if len(self._profile_rows) >= self.iterations:
            self._write(self._profile_record())
            self.profiled = True
            self.mode = "run"
            self._all_phases = False
            self._reset_interval(None)

    def _profile_record(self) -> dict[str, Any]:
        rows = self._profile_rows
        n = len(rows)
        mean = [sum(r[i] for r in rows) / n for i in range(len(rows[0]))]
        loader = self._take_loader_times()
        return {
            "kind": "profile",
            "iterations": n,
            "samples_per_iter": mean[1],
            "t_iter": round(mean[0], 9),
            "t_f": round(mean[2 + _FWD], 9),
            "t_b": round(mean[2 + _BWD], 9),
            "t_u": round(mean[2 + _UPD], 9),
            "t_d_wait": round(mean[2 + _DATA], 9),
            "t_d": _rounded(loader or [r[2 + _DATA] for r in rows]),
            "t_w": _rounded([r[2 + _SYNC] for r in rows]),
            "loader": bool(loader),
        }

    def _write(self, record: dict[str, Any]) -> None:
        if not self.writer:
            return
        self._seq += 1
        record.update(
            v=FORMAT_VERSION,
            job=self.job_id,
            run=self.run,
            node=self.node,
            seq=self._seq,
            at=round(self._wall(), 3),
        )
        if self._samples_done is not None:
            record["samples_done"] = self._samples_done
        line = json.dumps(record, separators=(",", ":")) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                if f.tell() > MAX_FILE_BYTES:
                    f.truncate(0)
                f.write(line)
        except OSError:
            self.errors += 1


def _rounded(values: list[float]) -> list[float]:
    return [round(v, 7) for v in values[:MAX_SAMPLES_PER_RECORD]]
