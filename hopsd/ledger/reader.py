"""The ledger read through the database driver alone, for the CLI's quick read commands.

``hops status`` should answer like ``squeue``; importing SQLAlchemy's engine and
ORM costs it most of that budget before a row is read. This reader opens the
database with the driver itself (``sqlite3``, or psycopg for PostgreSQL), with
the same read-only rules as the engine (SQLite ``mode=ro``, ``immutable`` when
no writer is left; a PostgreSQL session that starts read-only), and answers the
reads the status document needs with the same frozen records the unit of work
returns. A job is read as its status line (:class:`JobLine`, the 24 columns the
document shows, not all 41) with its newest forecast joined in the same query.
Its queries are written here once, as plain SQL; a test checks that its records
equal the unit of work's on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from hopsd.ledger.dberrors import HINTS, classify_dbapi_error
from hopsd.ledger.errors import LedgerError, LedgerUnavailableError, require_psycopg
from hopsd.ledger.records import (
    CHUNK,
    DEFAULT_LEASE,
    NOT_RUNNING_STATES,
    RECORD_DEFAULTS,
    Forecast,
    ForeseenLine,
    JobLine,
    JobState,
    LeaseInfo,
    QueueEntry,
    RefusalRecord,
    RoundInfo,
    SlurmIds,
    Users,
    believed_expiry,
)
from hopsd.ledger.schema_head import VERSION_QUERY, is_head

#: The columns of a job its status line is made of, in :class:`JobLine`'s field order.
LINE_COLUMNS = tuple(JobLine.__dataclass_fields__)


def _selected(column: str) -> str:
    """The job's column as the line read selects it: quoted (``user`` is a reserved word in
    PostgreSQL), and a NULL read as the record's default by the database, not per row here."""
    default = RECORD_DEFAULTS.get(column)
    if default is None:
        return f'j."{column}"'
    return f'COALESCE(j."{column}", {_literal(default)})'


def _literal(value: object) -> str:
    """An SQL literal of a record default: a text, an integer or a float."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"no SQL literal for a default of {type(value).__name__}")
    return repr(value)


_SELECT_LINE = ", ".join(_selected(c) for c in LINE_COLUMNS)
# Each line with its newest forecast (the prediction of the highest id, as
# hopsd.ledger.predictions.latest reads it), joined: at 12,000 jobs the join costs
# 0.02 s, a second query of their ids and its Prediction records 0.06 s.
_LINES_IN_STATES = (
    f"SELECT {_SELECT_LINE}, p.id, p.start_at, p.end_at FROM jobs j LEFT JOIN predictions p"
    " ON p.id = (SELECT MAX(q.id) FROM predictions q WHERE q.job_id = j.id)"
    " WHERE j.state IN ({marks})"
)
_LINE_ORDER = " ORDER BY j.submit_time, j.id"
_QUEUE_ENTRIES = "SELECT id, state, latency_ratio, submit_time FROM jobs WHERE state IN ({marks})"
_QUEUE_LENGTH = "SELECT COUNT(*) FROM jobs WHERE state IN ({marks})"
_FINISHED_LRS = (
    "SELECT latency_ratio FROM jobs WHERE end_time >= {mark} AND latency_ratio IS NOT NULL "
    "AND first_start_time IS NOT NULL ORDER BY end_time"
)
_LEASE = (
    "SELECT name, holder, acquired_at, heartbeat_at, expires_at, token "
    "FROM daemon_lease WHERE name = {mark}"
)
_LATEST_ROUND = (
    "SELECT number, started_at, shadow, policy FROM rounds ORDER BY started_at DESC, id DESC "
    "LIMIT 1"
)
_REFUSALS = (
    'SELECT slurm_job_id, "user", reason, refused_at FROM refusals{where} ORDER BY slurm_job_id'
)


@dataclass(frozen=True)
class Target:
    """Where a ledger URL points: an SQLite file, or PostgreSQL connection keywords."""

    backend: str
    path: str = ""
    connect: tuple[tuple[str, str], ...] = ()


def parse_target(url: str) -> Target:
    """``sqlite:///PATH`` (or a bare path) or ``postgresql[+psycopg]://USER:PW@HOST:PORT/DB``."""
    if "://" not in url:
        return Target("sqlite", str(Path(url).expanduser().resolve()))
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme == "sqlite":
        return Target("sqlite", unquote(url.split("://", 1)[1].split("?", 1)[0][1:]))
    if scheme not in ("postgresql", "postgres"):
        raise LedgerUnavailableError(f"unsupported ledger database {scheme!r}")
    keys = {
        "host": unquote(parts.hostname or ""),
        "port": str(parts.port or ""),
        "user": unquote(parts.username or ""),
        "password": unquote(parts.password or ""),
        "dbname": unquote(parts.path.lstrip("/")),
    }
    keys.update(parse_qsl(parts.query))
    return Target("postgresql", connect=tuple((k, v) for k, v in keys.items() if v))


def sqlite_read_only_query(path: Path) -> dict[str, str]:
    """The URI options that open an SQLite ledger without any write (see the engine).

    A reader of a WAL-mode file needs its ``-shm`` index: while hopsd runs the
    file exists and is read as it is; when hopsd is stopped it is gone, and a
    user who may not write the directory could not create it. Then nobody
    writes the file, and it is opened ``immutable`` (no locks, no index).
    """
    query = {"mode": "ro"}
    no_writer = not Path(f"{path}-wal").exists()
    if no_writer and path.exists() and not os.access(path.parent, os.W_OK):
        query["immutable"] = "1"
    return query


class Reader:
    """One read-only transaction's answers, as the unit of work's read methods give them."""

    def __init__(self, conn: Any, mark: str) -> None:
        self._conn = conn
        self._mark = mark

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self._conn.cursor()
        try:
            cursor.execute(sql, tuple(args))
            return list(cursor.fetchall())
        finally:
            cursor.close()

    def at_head(self) -> bool:
        """Whether the schema is the one this hops reads (else ask the migrations why not)."""
        try:
            return is_head([r[0] for r in self._rows(VERSION_QUERY)])
        except LedgerError:
            raise
        except Exception:  # no alembic_version table: an empty or foreign database
            return False

    def _marks(self, count: int) -> str:
        return ", ".join([self._mark] * count)

    def job_lines(
        self, states: Iterable[JobState], users: Users = None, slurm_ids: SlurmIds = None
    ) -> list[ForeseenLine]:
        """The status lines of jobs in any of ``states`` (of ``users``, with ``slurm_ids``:
        None is any), oldest submission first, each with its newest forecast. The filters
        are the database's: a user's status reads only the user's jobs."""
        wanted: list[Any] = [JobState(s).value for s in states]
        sql = _LINES_IN_STATES.format(marks=self._marks(len(wanted)))
        kept: list[tuple[str, set[Any]]] = []
        for column, values in (("user", users), ("slurm_job_id", slurm_ids)):
            if values is not None:
                kept.append((column, set(values)))
        if not wanted or any(not chosen for _, chosen in kept):
            return []
        unsent: list[tuple[str, set[Any]]] = []  # too long to send: filtered below
        for column, chosen in kept:
            if len(chosen) > CHUNK:
                unsent.append((column, chosen))
                continue
            sql += f' AND j."{column}" IN ({self._marks(len(chosen))})'
            wanted += sorted(chosen)
        decoded = _Decoded()
        lines = [_foreseen(row, decoded) for row in self._rows(sql + _LINE_ORDER, wanted)]
        return [(r, f) for r, f in lines if all(getattr(r, c) in v for c, v in unsent)]

    def queue_entries(self) -> list[QueueEntry]:
        """Every active job not running, as the queue's order needs it."""
        rows = self._waiting(_QUEUE_ENTRIES)
        return [QueueEntry(i, _STATES[s], lr, float(t)) for i, s, lr, t in rows]

    def queue_length(self) -> int:
        """How many active jobs are not running."""
        return int(self._waiting(_QUEUE_LENGTH)[0][0])

    def _waiting(self, template: str) -> list[tuple[Any, ...]]:
        """The rows of ``template`` over the active jobs not running."""
        return self._rows(template.format(marks=self._marks(len(_NOT_RUNNING))), _NOT_RUNNING)

    def finished_latency_ratios(self, since: float) -> list[float]:
        """Latency ratios of jobs that ran and ended at or after ``since`` (input of RAQLR)."""
        rows = self._rows(_FINISHED_LRS.format(mark=self._mark), [since])
        return [float(r[0]) for r in rows]

    def lease_info(self, name: str = DEFAULT_LEASE) -> LeaseInfo | None:
        rows = self._rows(_LEASE.format(mark=self._mark), [name])
        if not rows:
            return None
        n, holder, acquired, beat, expires, token = rows[0]
        beat = None if beat is None else float(beat)
        return LeaseInfo(n, holder, acquired, beat, believed_expiry(beat, expires), int(token or 0))

    def latest_round(self) -> RoundInfo | None:
        rows = self._rows(_LATEST_ROUND)
        if not rows:
            return None
        number, started_at, shadow, policy = rows[0]
        return RoundInfo(number, started_at, bool(shadow), policy)

    def refusals(self, users: Iterable[str] | None = None) -> list[RefusalRecord]:
        """The refused jobs (of some users), oldest first."""
        names = None if users is None else list(users)
        where = ""
        if names is not None:
            if not names:
                return []
            where = f' WHERE "user" IN ({", ".join([self._mark] * len(names))})'
        rows = self._rows(_REFUSALS.format(where=where), names or ())
        return [RefusalRecord(int(j), u, r, float(t)) for j, u, r, t in rows]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


class _Decoded:
    """Column texts decoded once per read: at 10,000 queued jobs most jobs share their
    demands and placement texts, and ``hops status`` would otherwise parse each again."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], Any] = {}

    def decode(self, column: str, raw: Any, convert: Callable[[Any], Any]) -> Any:
        """``convert`` of the column's JSON value; a text seen before is not parsed again."""
        if not isinstance(raw, str):  # a driver that decodes JSON itself, or NULL
            return convert(_json(raw))
        key = (column, raw)
        if key not in self._seen:
            self._seen[key] = convert(_json(raw))
        return self._seen[key]


def _demands(value: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in value)


def _parts(value: Any) -> tuple[tuple[str, int], ...] | None:
    return None if value is None else tuple((str(n), int(g)) for n, g in value)


_STATES = {s.value: s for s in JobState}
_NOT_RUNNING = [s.value for s in NOT_RUNNING_STATES]

_AT = {c: k for k, c in enumerate(LINE_COLUMNS)}
_DEMANDS, _PARTS, _STATE = _AT["demands"], _AT["current_parts"], _AT["state"]


_LINE_WIDTH = len(LINE_COLUMNS)


def _foreseen(row: tuple[Any, ...], decoded: _Decoded) -> ForeseenLine:
    """A line and its newest forecast from a row of the joined read."""
    values = list(row)
    said, start_at, end_at = values[_LINE_WIDTH:]
    del values[_LINE_WIDTH:]
    forecast = None if said is None else Forecast(_float(start_at), _float(end_at))
    return _line(values, decoded), forecast


def _float(value: Any) -> float | None:
    """A time as each database stores it (PostgreSQL may give a Decimal), as a float."""
    return None if value is None else float(value)


def _line(values: list[Any], decoded: _Decoded) -> JobLine:
    """A status line from a ``jobs`` row's values (taken over), as
    :func:`hopsd.ledger.jobs.record_of` builds a record's same fields (by column position:
    at 10,000 rows a dict per row is most of the read). The defaults are in: see
    :func:`_selected`."""
    values[_DEMANDS] = decoded.decode("demands", values[_DEMANDS], _demands)
    state = values[_STATE]
    values[_STATE] = _STATES.get(state) or JobState(state)
    values[_PARTS] = decoded.decode("parts", values[_PARTS], _parts)
    line = object.__new__(JobLine)
    line.__dict__.update(zip(LINE_COLUMNS, values, strict=True))  # complete, never changed
    return line


def _connect_sqlite(path: str, timeout_ms: int) -> Any:
    resolved = Path(path).resolve()
    query = "&".join(f"{k}={v}" for k, v in sqlite_read_only_query(resolved).items())
    conn = sqlite3.connect(
        f"file:{quote(str(resolved))}?{query}", uri=True, timeout=timeout_ms / 1000
    )
    conn.isolation_level = None  # BEGIN below: one snapshot for every read
    conn.execute("BEGIN")
    return conn


def _connect_postgresql(target: Target, timeout_ms: int) -> Any:
    require_psycopg()
    import psycopg
    from psycopg.conninfo import make_conninfo

    keys = dict(target.connect)
    keys.pop("driver", None)
    options = f"{keys.pop('options', '')} -c lock_timeout={int(timeout_ms)}"
    options += " -c default_transaction_read_only=on"
    keys["options"] = options.strip()
    return psycopg.connect(make_conninfo("", **keys), connect_timeout=10)


@contextmanager
def reading(url: str, timeout_ms: int = 2000) -> Iterator[Reader]:
    """A :class:`Reader` over one read-only transaction, rolled back at the end.

    Driver errors an operator can act on become the ledger's typed errors, with
    the same hints the engine gives.
    """
    target = parse_target(url)
    conn = None
    try:
        if target.backend == "sqlite":
            conn = _connect_sqlite(target.path, timeout_ms)
            yield Reader(conn, "?")
        else:
            conn = _connect_postgresql(target, timeout_ms)
            yield Reader(conn, "%s")
    except LedgerError:
        raise
    except Exception as exc:
        kind = classify_dbapi_error(exc)
        if kind is None:
            raise
        raise kind(f"{_first_line(exc)} ({HINTS[kind]})") from exc
    finally:
        if conn is not None:
            conn.rollback()
            conn.close()


def _first_line(exc: BaseException) -> str:
    return re.sub(r"\s+", " ", str(exc)).strip()


def redacted(url: str) -> str:
    """The URL without its password, safe to print in error messages."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
