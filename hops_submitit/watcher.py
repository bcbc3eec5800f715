"""Job states for submitit, read through hops's Slurm port in one call for all jobs.

Why not submitit's sacct watcher: hops jobs are read the way hopsd reads them
(``squeue --json`` or slurmrestd), which also works where accounting is off;
accounting is asked only for jobs the queue no longer lists.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from submitit.core import core, logger

from hops_submitit.port import configured_port
from hopsd.slurm.errors import SlurmError
from hopsd.slurm.port import SlurmPort


class HopsInfoWatcher(core.InfoWatcher):
    """One port read per refresh for every registered job (submitit's schedule of refreshes)."""

    def __init__(self, delay_s: int = 60, port: Callable[[], SlurmPort] = configured_port) -> None:
        super().__init__(delay_s)
        self._port = port

    def get_state(self, job_id: str, mode: str = "standard") -> str:
        return self.get_info(job_id, mode=mode).get("State") or "UNKNOWN"

    def read_info(self, string: bytes | str) -> dict[str, dict[str, str]]:
        """Unused: states come from the port, never from a command's text."""
        raise NotImplementedError("HopsInfoWatcher reads states through the Slurm port")

    def _make_command(self) -> list[str] | None:
        return None

    def update(self) -> None:
        """Refresh the states of all unfinished registered jobs, then mark the finished ones."""
        wanted = {int(j) for j in self._registered - self._finished if j.isdigit()}
        if not wanted:
            return
        self._num_calls += 1
        try:
            self._info_dict.update(read_states(self._port(), wanted))
        except SlurmError as exc:
            logger.get_logger().warning(f"hops: job states not refreshed ({exc})")
        self._last_status_check = time.time()
        for job_id in self._registered - self._finished:
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)


def read_states(port: SlurmPort, job_ids: set[int]) -> dict[str, dict[str, str]]:
    """``{job id: {"State": ..., "NodeList": ...}}`` from the queue, then from accounting."""
    found = {
        str(j.job_id): {"State": j.state, "NodeList": ",".join(j.nodes)}
        for j in port.list_jobs()
        if j.job_id in job_ids
    }
    gone = sorted(job_ids - {int(j) for j in found})
    if gone:
        try:
            records = port.accounting(gone)
        except SlurmError as exc:
            logger.get_logger().warning(f"hops: no accounting for jobs {gone} ({exc})")
            records = []
        for rec in records:
            found[str(rec.job_id)] = {"State": rec.state, "NodeList": ",".join(rec.nodes)}
    return found
