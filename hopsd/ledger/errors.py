"""Typed errors of the ledger, so the daemon and the CLI can print a clear message.

Every database failure that an operator can act on (a locked file, a full disk,
an unreachable server, an outdated schema, a second daemon) is raised as one of
these instead of a raw driver error, and always before any partial state is
committed: the transaction that failed is rolled back by its owner.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hopsd.core.errors import HopsError, InvalidInputError, missing_extra


class LedgerError(HopsError):
    """Base class of every error the ledger raises on purpose."""


class LedgerUnavailableError(LedgerError):
    """The database cannot be used right now (unreachable, unopenable, full, locked)."""


class LedgerLockedError(LedgerUnavailableError):
    """Another connection holds a lock longer than the configured busy/lock timeout."""


class LedgerFullError(LedgerUnavailableError):
    """The database or its disk is full; the failed transaction left prior data intact."""


class SchemaOutdatedError(LedgerError):
    """The database schema is older than this code (or empty): run the upgrade command."""


class SchemaNewerError(LedgerError):
    """The database was migrated by a newer hops than this one; upgrade hops itself."""


class IllegalTransitionError(LedgerError, InvalidInputError):
    """A job state change the state machine does not allow (e.g. done -> running)."""

    def __init__(self, job_id: str, current: str, requested: str) -> None:
        super().__init__(f"job {job_id!r}: illegal state transition {current} -> {requested}")
        self.job_id = job_id
        self.current = current
        self.requested = requested


class UnknownJobError(LedgerError, LookupError):
    """A job id the ledger does not know."""


class DuplicateJobError(LedgerError):
    """A job id that the ledger already holds was added again."""


class IntentStateError(LedgerError):
    """An intent was asked to change state in a way that would lose information."""


class LeaseHeldError(LedgerError):
    """Another daemon holds the lease, so this one must not act on the cluster."""

    def __init__(self, name: str, holder: str, expires_at: float) -> None:
        super().__init__(
            f"lease {name!r} is held by {holder!r} until {_utc(expires_at)}; "
            "another hopsd is running against this ledger"
        )
        self.name = name
        self.holder = holder
        self.expires_at = expires_at


class LeaseLostError(LeaseHeldError):
    """This daemon's lease expired and was taken over (or released) meanwhile."""


class FencedError(LeaseLostError):
    """The lease no longer carries this daemon's fencing token: another hopsd took
    it since, so whatever this one was about to enact must not happen."""

    def __init__(self, name: str, holder: str, expires_at: float, token: int) -> None:
        super().__init__(name, holder, expires_at)
        self.token = token
        self.args = (f"fenced: lease {name!r} is now held by {holder!r} (token {token})",)


def _utc(epoch: float) -> str:
    """ISO 8601 UTC, as hops logs times; a time no calendar holds is named, not raised."""
    try:
        return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):
        return f"{epoch!r} (not a time)"


def require_psycopg() -> None:
    """A PostgreSQL ledger needs psycopg, the ``postgres`` extra of the slim install."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise LedgerUnavailableError(
            str(missing_extra("a PostgreSQL ledger", "psycopg", "postgres"))
        ) from exc
