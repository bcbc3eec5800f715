"""What one job's data may cost: at most that job, never the tick or another user's job.

Two things are kept here, per Slurm job id:

* **refused inputs** -- a report line, progress file, working directory or
  tag that :mod:`hopsd.userdata` (or a spool check) refused;
* **contained failures** -- any exception raised while hopsd worked on one
  job (:meth:`InputProblems.guard`), whatever its type: the job is skipped for
  the rest of that step in this tick, and the others carry on.

Each is logged once per job and cause (a user appending a bad line every
second must not flood the log), counted in a Prometheus series through the
``count_*`` hooks the daemon wires to :mod:`hopsd.daemon.metrics`, and kept as
the job's latest problem until the reconciler writes it into the job's ledger
row (``input_problem``), where ``hops status`` shows it to the job's owner.

Failures of hopsd's own infrastructure (the ledger's database, Slurm, the
lease) are not the job's doing and are re-raised: they fail the tick as before.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TypeVar

from hopsd.ledger.errors import (
    LeaseHeldError,
    LedgerUnavailableError,
    SchemaNewerError,
    SchemaOutdatedError,
)
from hopsd.ledger.unit import DRIVER_ERRORS
from hopsd.slurm.errors import SlurmCommandError, SlurmUnavailableError

log = logging.getLogger("hopsd.problems")

T = TypeVar("T")
Counter = Callable[[str], None]

MAX_REASON_CHARS = 300
# hopsd's own infrastructure: the database, the lease, Slurm. A ledger error about
# one job (an illegal transition, say) is that job's and is contained.
_INFRASTRUCTURE: tuple[type[BaseException], ...] = (
    *DRIVER_ERRORS,
    LedgerUnavailableError,
    SchemaOutdatedError,
    SchemaNewerError,
    LeaseHeldError,
    SlurmUnavailableError,
    SlurmCommandError,
)
_DIGITS = re.compile(r"\d+")


def _ignore(_label: str) -> None:
    return None


class InputProblems:
    """Refused inputs and contained failures of jobs, until their rows record them."""

    def __init__(
        self, count_refused: Counter | None = None, count_failed: Counter | None = None
    ) -> None:
        self.count_refused: Counter = count_refused or _ignore
        self.count_failed: Counter = count_failed or _ignore
        self._logged: set[tuple[int, str]] = set()
        self._latest: dict[int, str] = {}

    def note(self, slurm_id: int, problem: str, kind: str = "report") -> None:
        """A refused input of ``kind`` (report, progress, work_dir, tag...)."""
        problem = problem[:MAX_REASON_CHARS]
        self.count_refused(kind)
        self._latest[slurm_id] = problem
        if self._first(slurm_id, problem):
            log.warning(
                "event=input-refused slurm_job=%s input=%s reason=%r", slurm_id, kind, problem
            )

    @staticmethod
    def contained(exc: BaseException) -> bool:
        """Whether :meth:`guard` would contain ``exc`` (not one of hopsd's infrastructure)."""
        return isinstance(exc, Exception) and not isinstance(exc, _INFRASTRUCTURE)

    def guard(self, slurm_id: int, step: str, work: Callable[[], T]) -> T | None:
        """``work()`` for one job; any exception of the job's making costs only that job.

        Returns None when the work failed; infrastructure errors propagate.
        """
        try:
            return work()
        except _INFRASTRUCTURE:
            raise
        except Exception as exc:
            self.failed(slurm_id, step, exc)
            return None

    def failed(self, slurm_id: int, step: str, exc: BaseException) -> None:
        """Record an exception raised while working on one job."""
        message = str(exc).splitlines()[0][:120] if str(exc) else ""
        reason = f"hopsd skipped this job in {step}: {type(exc).__name__}: {message}".rstrip(": ")
        self.count_failed(step)
        self._latest[slurm_id] = reason[:MAX_REASON_CHARS]
        if self._first(slurm_id, f"{step}:{type(exc).__name__}"):
            log.error(
                "event=job-skipped slurm_job=%s step=%s error=%r; other jobs carry on",
                slurm_id,
                step,
                reason,
                exc_info=exc,
            )

    def take(self, slurm_id: int) -> str | None:
        """The job's latest problem since the last call, or None; hands it to the ledger."""
        return self._latest.pop(slurm_id, None)

    def pending(self) -> set[int]:
        return set(self._latest)

    def forget(self, slurm_id: int) -> None:
        """A job that ended: its log de-duplication is no longer needed."""
        self._logged = {k for k in self._logged if k[0] != slurm_id}

    def retain(self, slurm_ids: set[int]) -> None:
        """Forget jobs Slurm no longer lists (refused ones never get a row), bounding memory."""
        self._latest = {k: v for k, v in self._latest.items() if k in slurm_ids}
        self._logged = {k for k in self._logged if k[0] in slurm_ids}

    def _first(self, slurm_id: int, cause: str) -> bool:
        key = (slurm_id, _DIGITS.sub("#", cause)[:80])
        if key in self._logged:
            return False
        self._logged.add(key)
        return True
