"""The job-side probe of hops: per-phase timings and progress, reported to hopsd.

Dependency-free on purpose (standard library only, nothing else of hopsd), so any
training script can import it whatever its framework::

    from hops_probe import Probe

    probe = Probe()   # first thing: the notice handler is in place before heavy imports
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

Before hops moves or preempts a job it sends the job a notice (SIGUSR1 by
default, or the signal named by ``HOPS_NOTICE_SIGNAL``) and waits up to its
grace period for a checkpoint. Cooperating takes one line in the loop::

        if probe.preempt_requested():
            save_checkpoint()
            probe.checkpointed()

or a callback, called after the iteration in which the notice arrived::

    probe.on_preempt(save_checkpoint)

At each start the job can read what hops decided for this run: ``probe.gpus``
(the GPU count hops placed it on), ``probe.lr`` (the learning rate
``hops submit --lr/--lr-scale`` gives for that count) and
``probe.total_samples`` (from ``hops submit``); None when unknown.

GPU work is asynchronous: a phase ends when its kernels are queued, not when
they are done, so on a GPU the forward phase looks short and the wait shows
up wherever the loop next blocks. Set ``probe.synchronize =
torch.cuda.synchronize`` (``hops_probe.pytorch.attach`` does) to end each
timed phase and iteration with a device synchronisation: the phases are then
true, at the cost of one synchronisation per timed phase (in running mode only
``data`` and ``sync`` are timed).

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
``$HOPS_SPOOL_DIR`` (``hops submit`` exports it: the user's own directory in
hopsd's spool) or the job's working directory. Only the rank-0 process of a
multi-process job writes; ``samples`` should count the whole job's samples per
iteration. The probe never raises into the training loop: I/O errors are
counted and otherwise ignored.

Where another user may have been first (a shared or world-writable
directory), the probe trusts nothing it did not make: it never follows a link,
writes only to a regular file it owns with no other name (it never truncates
anyone else's file), and ignores a mode file unless root, hopsd (the owner of
the spool's parent) or the job's own user owns it.

Standard library only, Python 3.8 or newer: the distribution ``hops-probe``
(``pip install hops-probe``, or ``pip install ./probe`` from a checkout),
module ``hops_probe``, installs on its own into any training environment.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hops_probe.control import (
    MAX_PROFILE_ITERATIONS,
    env_float,
    env_int,
    positive,
    read_mode_file,
    resolve_mode,
)
from hops_probe.safe_files import open_own_file, trusted_owners

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_PROFILE_ITERATIONS",
    "MAX_SAMPLES_PER_RECORD",
    "PHASES",
    "Iteration",
    "Probe",
    "open_own_file",
    "read_mode_file",
    "resolve_mode",
    "trusted_owners",
]

FORMAT_VERSION = 1
PHASES = ("data", "forward", "backward", "update", "sync")
_ALIASES = {"sync_wait": "sync", "wait": "sync", "load": "data"}
MAX_FILE_BYTES = 4 * 1024 * 1024  # the probe starts the file afresh beyond this
MAX_SAMPLES_PER_RECORD = 128  # data-time / sync-wait samples kept per run record
_DATA, _FWD, _BWD, _UPD, _SYNC = range(5)


def _rank(env: Mapping[str, str]) -> int:
    """This process's rank: torchrun's ``RANK``; a launcher's child (Lightning starts
    ranks with ``LOCAL_RANK`` and ``NODE_RANK`` only) is rank 0 only as node 0's first;
    else srun's ``SLURM_PROCID`` (the batch script's own process is 0)."""
    raw = env.get("RANK", "")
    if raw.isdigit():
        return int(raw)
    local, node = env.get("LOCAL_RANK", ""), env.get("NODE_RANK", "")
    if local.isdigit():
        return int(local) + (int(node) if node.isdigit() else 0)
    raw = env.get("SLURM_PROCID", "")
    return int(raw) if raw.isdigit() else 0


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
        sync = self._iteration._probe.synchronize
        if sync is not None:
            sync()
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
        sync = self._probe.synchronize
        if sync is not None:
            sync()
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
        shared = bool(env.get("HOPS_SPOOL_DIR"))
        self.spool = Path(env.get("HOPS_SPOOL_DIR") or os.getcwd())
        self.path = self.spool / f"{self.job_id}.jsonl"
        self.run = env_int(env, "SLURM_RESTART_COUNT", 0, 0, 1_000_000)
        self.node = env.get("SLURMD_NODENAME") or socket.gethostname()
        self.flush_s = env_float(env, "HOPS_PROBE_FLUSH_S", 5.0)
        self.warmup = env_int(env, "HOPS_PROBE_WARMUP", 2, 0, 100)
        owners = trusted_owners(self.spool, shared)
        control = read_mode_file(self.spool / f"{self.job_id}.mode", self.run, owners)
        mode, self.iterations = resolve_mode(env, self.spool, self.job_id, self.run, control)
        gpus = positive(control, "gpus")
        #: GPUs hops placed this run on, the learning rate for them, the job's size.
        self.gpus: int | None = int(gpus) if gpus is not None else None
        self.lr: float | None = positive(control, "lr")
        self.total_samples: float | None = env_float(env, "HOPS_TOTAL_SAMPLES", 0.0) or None
        self.writer = _rank(env) == 0 and mode != "off"
        self.mode = mode
        self.errors = 0
        self.profiled = False
        self._clock = clock
        self._wall = wall
        self._all_phases = mode == "profile"
        self._iteration = Iteration(self, clock)
        self._seq = 0
        self._started_at = _run_start(env, wall)
        self._first_done = False
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
        self._notice = False  # set by the notice signal's handler
        #: Notice signals this process received (a checkpoint does not reset it).
        self.notices_heard = 0
        self._notice_seen_at: float | None = None
        self._on_preempt: Callable[[], object] | None = None
        #: Called at the end of every timed phase and iteration when set, e.g.
        #: ``torch.cuda.synchronize``: GPU work is asynchronous, and without it a
        #: phase's time is only the time to queue its kernels (see the docstring).
        self.synchronize: Callable[[], object] | None = None
        self.notice_signal = _install_notice(env.get("HOPS_NOTICE_SIGNAL", "USR1"), self)

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

    def preempt_requested(self) -> bool:
        """True once hops gave notice that it will move or preempt the job (until checkpointed).

        Cheap enough to ask every iteration. Save a checkpoint, then call
        :meth:`checkpointed`: hopsd requeues the job as soon as it reads that,
        instead of waiting out the grace period.
        """
        if self._notice and self._notice_seen_at is None:
            self._notice_seen_at = self._clock()
        return self._notice

    def on_preempt(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` (save a checkpoint) after the iteration in which notice came.

        :meth:`checkpointed` is reported for it, with the time it took.
        """
        self._on_preempt = callback

    def checkpointed(self, seconds: float | None = None) -> None:
        """Tell hopsd the job saved a checkpoint (after a notice, or of its own accord).

        ``seconds`` is how long saving took; by default the time since
        :meth:`preempt_requested` first said True. Progress so far is flushed
        with it, so hopsd knows what the checkpoint holds.
        """
        if seconds is None:
            seen = self._notice_seen_at
            seconds = self._clock() - seen if seen is not None else 0.0
        self._notice = False
        self._notice_seen_at = None
        if self.mode == "run":
            self.flush()
        self._write({"kind": "checkpoint", "seconds": round(max(seconds, 0.0), 6)})

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
        if not self._first_done:
            self._first_iteration()
        if self._notice and self._on_preempt is not None:
            self._take_notice(self._on_preempt)
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

    def _first_iteration(self) -> None:
        """Report how long this run took from its start to its first iteration.

        With the time the job takes to checkpoint, that is what a restart costs
        it; hops weighs moves with it.
        """
        self._first_done = True
        startup = self._wall() - self._started_at
        if 0 <= startup < 86_400:
            self._write({"kind": "start", "startup_s": round(startup, 3)})

    def _take_notice(self, callback: Callable[[], object]) -> None:
        started = self._clock()
        self._notice = False
        callback()
        self.checkpointed(self._clock() - started)

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
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        try:
            fd = open_own_file(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except OSError:
            self.errors += 1
            return
        try:
            if os.fstat(fd).st_size > MAX_FILE_BYTES:
                os.ftruncate(fd, 0)  # this job's own file (checked on the descriptor)
            os.write(fd, line)
        except OSError:
            self.errors += 1
        finally:
            os.close(fd)


def _run_start(env: Mapping[str, str], wall: Callable[[], float]) -> float:
    """When this run started (epoch seconds): Slurm's start time, else this process's.

    Slurm 23.02 and later export ``SLURM_JOB_START_TIME``; before, the start of
    the process (from ``/proc``) is the best the job knows, else now. The
    process start is counted back from now on the boot clock it is kept in
    (``/proc/stat``'s ``btime`` is whole seconds: up to a second early).
    """
    raw = env.get("SLURM_JOB_START_TIME", "")
    if raw.isdigit():
        return float(raw)
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 (starttime), counted after "pid (comm)"
        since_boot = ticks / os.sysconf("SC_CLK_TCK")
        age = max(time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot, 0.0)
        return time.time() - age  # /proc's clocks are the host's, whatever ``wall`` is
    except (OSError, ValueError, IndexError, AttributeError):
        return wall()


def _install_notice(name: str, probe: Probe) -> str:
    """Catch hops's notice signal (``USR1`` by default) for ``probe``; the signal's name.

    Only the main thread may set signal handlers: elsewhere (and for an
    unknown name, or ``none``) no notice is caught and "" is returned. A handler
    the program had is still called after the probe notes the notice.
    """
    word = name.strip().upper()
    number = getattr(signal, "SIG" + (word[3:] if word.startswith("SIG") else word), None)
    main = threading.current_thread() is threading.main_thread()
    if not isinstance(number, signal.Signals) or not main:
        return ""
    previous = signal.getsignal(number)

    def note(signum: int, frame: Any) -> None:
        probe._notice = True
        probe.notices_heard += 1
        if callable(previous):
            previous(signum, frame)

    try:
        signal.signal(number, note)
    except (OSError, ValueError):
        return ""
    atexit.register(ignore_at_exit, number)
    return number.name


def ignore_at_exit(number: int) -> None:
    """Ignore the notice signal from the end of the program on.

    While Python shuts down it puts the signal's default action back (for
    ``USR1``: terminate) before the process has exited. A notice that arrives
    then, say the end of a profiling run hops asked for as the job finished its
    last samples, would kill a job whose work is done, and Slurm would record it
    FAILED. An ignored signal is left ignored. Registered once per handler by
    :func:`_install_notice`; the training is over when it runs, so nothing is
    left to checkpoint.
    """
    try:
        signal.signal(number, signal.SIG_IGN)
    except (OSError, ValueError):
        return


def _rounded(values: list[float]) -> list[float]:
    return [round(v, 7) for v in values[:MAX_SAMPLES_PER_RECORD]]
