"""Inside a hops job: who the job is, and what hops's checkpoint notice does.

hops announces a move or preemption with SIGUSR1 to the batch script (the
submitted Python runs as the batch script itself, see ``executor``). Then a
``submitit.helpers.Checkpointable`` is asked for its checkpoint, which replaces
the job's pickled submission, and the job requeues itself held: hopsd places
it again and the next run resumes from the checkpoint. A function that cannot
checkpoint is requeued too and starts over, as any hops job without a
checkpoint. Unlike submitit's timeout handling, a notice never counts against
``max_num_timeout``: being moved is not the job's fault.
"""

from __future__ import annotations

import os
import signal
import sys
import types
from collections.abc import Callable

from submitit.core import job_environment, logger, utils

from hops_submitit.port import configured_port
from hopsd.slurm.port import SlurmPort

NOTICE_SIGNAL = signal.SIGUSR1
REQUEUE_STOP_WAIT_S = 120


class HopsJobEnvironment(job_environment.JobEnvironment):
    """submitit's view of a running hops job (Slurm's variables; ``SUBMITIT_EXECUTOR=hops``)."""

    USR_SIG = "USR1"
    _env = {  # noqa: RUF012 - submitit's own class-level mapping
        "job_id": "SLURM_JOB_ID",
        "num_tasks": "SLURM_NTASKS",
        "num_nodes": "SLURM_JOB_NUM_NODES",
        "node": "SLURM_NODEID",
        "nodes": "SLURM_JOB_NODELIST",
        "global_rank": "SLURM_PROCID",
        "local_rank": "SLURM_LOCALID",
        "array_job_id": "SLURM_ARRAY_JOB_ID",
        "array_task_id": "SLURM_ARRAY_TASK_ID",
    }
    port: Callable[[], SlurmPort] = staticmethod(configured_port)

    def _handle_signals(self, paths: utils.JobPaths, submission: utils.DelayedSubmission) -> None:
        handler = NoticeHandler(self, paths, submission)
        signal.signal(signal.SIGTERM, handler.bypass)
        signal.signal(signal.SIGCONT, handler.bypass)
        signal.signal(NOTICE_SIGNAL, handler.on_notice)

    def _requeue(self, countdown: int) -> None:
        """Back to the queue, held, for hopsd to place again (``requeue_hold`` of the port)."""
        self.port().requeue_hold(int(self.raw_job_id))
        logger.get_logger().warning(f"hops: job {self.job_id} requeued held after the notice")


class NoticeHandler(job_environment.SignalHandler):
    """What the job does on hops's checkpoint notice."""

    def on_notice(self, signum: int, frame: types.FrameType | None = None) -> None:
        log = logger.get_logger()
        log.warning(f"hops: checkpoint notice ({signal.Signals(signum).name}) received")
        if os.environ.get("HOPS_SUBMITIT_DATA_PARALLEL"):
            return  # data-parallel (even on 1 GPU): the ranks checkpoint through their probe
        if self.env.global_rank != 0:
            return  # only the first task checkpoints and requeues
        delayed = self._delayed
        if hasattr(delayed.function, "checkpoint"):
            resumed = delayed._checkpoint_function()
            if resumed is None:
                raise utils.UncompletedJobError("checkpoint function returned None: not requeued")
            resumed.set_timeout(delayed._timeout_min, delayed._timeout_countdown)
            with utils.temporary_save_path(self._job_paths.submitted_pickle) as tmp:
                resumed.dump(tmp)
            log.warning("hops: checkpoint saved")
        self.env._requeue(delayed._timeout_countdown)
        await_requeue_stop()


def await_requeue_stop() -> None:
    """Let the requeue's own signal end this run, never a clean exit of our own.

    hopsd tells a run its requeue stopped (to run again) from one that ended by
    itself (done) by how the batch script ended: killed by a signal is stopped.
    SIGALRM, unhandled, is the fallback should Slurm's signal never come.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(REQUEUE_STOP_WAIT_S)
    while True:
        signal.pause()
