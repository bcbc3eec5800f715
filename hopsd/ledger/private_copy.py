"""An SQLite ledger users cannot lock, and the copies they read instead.

SQLite's locks are ``fcntl`` byte-range locks, and a *shared* lock needs only
read access: anyone who can open the ledger or its ``-shm`` index for reading
can hold the WAL write-lock byte and stop every write of hopsd. So hopsd keeps
its SQLite files private (mode 0600: :func:`make_private`), and a user reads a
copy made for them (:func:`copy_for`) on hopsd's own read connection (a WAL
reader, which never blocks the writer), holding only the rows Slurm's
``PrivateData`` lets that user see (:mod:`hopsd.core.privacy`). The copy
is handed over as an open descriptor of an unlinked file (see
:mod:`hopsd.daemon.readservice`): the user's locks on it reach nobody else.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from hopsd.core.privacy import PrivateData, Viewer
from hopsd.ledger.errors import LedgerUnavailableError

#: Mode of hopsd's SQLite files: its account only (root reads them anyway).
PRIVATE_MODE = 0o600
_SIDE_FILES = ("", "-wal", "-shm", "-journal")
REQUEST = b"copy\n"
MAX_REPLY = 4096


def socket_path(ledger: Path) -> Path:
    """Where hopsd answers requests for copies of the ledger at ``ledger``."""
    return ledger.with_name(ledger.name + ".sock")


def make_private(ledger: Path) -> list[str]:
    """Make the ledger and its side files hopsd's alone; returns the names it changed."""
    changed = []
    for suffix in _SIDE_FILES:
        path = Path(f"{ledger}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_mode & 0o077:
                path.chmod(PRIVATE_MODE)
                changed.append(path.name)
    return changed


def copy_for(ledger: Path, viewer: Viewer, rules: PrivateData) -> int:
    """A read-only descriptor of a copy of ``ledger`` for ``viewer``.

    A trusted viewer (or no rule) gets ``VACUUM INTO``; anyone else a copy
    written with only the rows they may see (:data:`TABLES`), so nothing hidden
    is ever in the file, not even in free pages. The copy is written in the
    ledger's directory (hopsd's, mode 0600 by ``mkstemp``) and unlinked before
    the descriptor is returned: no path to it remains for another user to open.
    """
    fd, name = tempfile.mkstemp(prefix=".hops-copy-", dir=ledger.parent)
    os.close(fd)
    try:
        source = sqlite3.connect(f"file:{quote(str(ledger))}?mode=ro", uri=True, timeout=5.0)
        try:
            if viewer.privileged or not rules.any:
                source.execute("VACUUM INTO ?", (name,))
            else:
                _write_visible(source, name, viewer.user, rules)
        finally:
            source.close()
        return os.open(name, os.O_RDONLY)
    finally:
        os.unlink(name)


#: Every ledger table and which of Slurm's rules hide its rows: ``jobs`` hides other
#: users' jobs and all that hangs on them; a table added later must be named here
#: (a test compares this with the ledger's tables).
TABLES: dict[str, str] = {
    "alembic_version": "",
    "daemon_lease": "",
    "jobs": "jobs",
    "rounds": "jobs",  # a round's note lists the jobs it acted on
    "allocations": "jobs",
    "runs": "jobs",
    "predictions": "jobs",
    "intents": "jobs",
    "throughput": "jobs",
    "profiles": "jobs",
    "refusals": "jobs",
    "usage": "usage",
}


def _write_visible(source: sqlite3.Connection, dest: str, user: str, rules: PrivateData) -> None:
    """The ledger's tables in ``dest``, each with the rows ``user`` may see."""
    source.isolation_level = None
    source.execute("ATTACH DATABASE ? AS copy", (f"file:{quote(dest)}?mode=rwc",))
    source.execute("PRAGMA copy.journal_mode = OFF")  # a new file, unlinked if this fails
    source.execute("BEGIN")  # one snapshot of every table
    try:
        schema = source.execute("SELECT type, name, sql FROM sqlite_master WHERE sql NOT NULL")
        ddl = [(kind, sql) for kind, name, sql in schema if not name.startswith("sqlite_")]
        for kind, sql in ddl:
            if kind == "table":
                source.execute(sql.replace("CREATE TABLE ", "CREATE TABLE copy.", 1))
        for table in TABLES:
            _copy_rows(source, table, user, rules)
        for kind, sql in ddl:
            if kind == "index":
                source.execute(re.sub(r"^CREATE (UNIQUE )?INDEX ", r"CREATE \1INDEX copy.", sql))
    finally:
        source.execute("COMMIT")
        source.execute("DETACH DATABASE copy")


def _copy_rows(conn: sqlite3.Connection, table: str, user: str, rules: PrivateData) -> None:
    columns = [r[1] for r in conn.execute(f'PRAGMA main.table_info("{table}")')]
    chosen = {c: f'"{c}"' for c in columns}
    where, args = "1", []
    hidden = rules.jobs and TABLES[table] == "jobs"
    if table == "jobs" and rules.accounts:
        chosen["account"] = "CASE WHEN \"user\" = ? THEN account ELSE '' END"
        args.append(user)
    if hidden and table in ("jobs", "refusals"):
        where = '"user" = ?'
        args.append(user)
    elif hidden and table == "rounds":
        chosen["note"] = "''"
    elif hidden:
        where = "job_id IN (SELECT id FROM copy.jobs)"
    if table == "usage":
        _copy_usage(conn, user, rules)
        return
    names = ", ".join(f'"{c}"' for c in columns)
    picked = ", ".join(chosen[c] for c in columns)
    conn.execute(
        f'INSERT INTO copy."{table}" ({names}) SELECT {picked} FROM main."{table}" WHERE {where}',
        args,
    )


def _copy_usage(conn: sqlite3.Connection, user: str, rules: PrivateData) -> None:
    """The viewer's usage as it is; other users' unless ``usage`` hides it, summed over
    their accounts (named none) when ``accounts`` hides those."""
    cols = '"user", account, interval_start, interval_end, gpu_s, gpu_s_norm'
    conn.execute(
        f'INSERT INTO copy.usage ({cols}) SELECT {cols} FROM main.usage WHERE "user" = ?', (user,)
    )
    if rules.usage:
        return
    if not rules.accounts:
        conn.execute(
            f'INSERT INTO copy.usage ({cols}) SELECT {cols} FROM main.usage WHERE "user" != ?',
            (user,),
        )
        return
    conn.execute(
        f"INSERT INTO copy.usage ({cols}) SELECT \"user\", '', interval_start, "
        "max(interval_end), sum(gpu_s), sum(gpu_s_norm) FROM main.usage "
        'WHERE "user" != ? GROUP BY "user", interval_start',
        (user,),
    )


def fetch_copy(ledger: Path, owner_uid: int, timeout_s: float = 30.0) -> Path:
    """Ask hopsd for a copy of ``ledger`` and store it in a file of the caller's own.

    The answer counts only from a server running as the ledger's owner (the
    socket sits in hopsd's directory, and its peer is checked too). The file is
    the caller's to remove.
    """
    with hopsd_socket(ledger, owner_uid, timeout_s) as conn:
        conn.sendall(REQUEST)
        reply, fds, _flags, _addr = socket.recv_fds(conn, MAX_REPLY, 1)
    if not fds:
        text = reply.decode(errors="replace").strip() or "no answer"
        raise LedgerUnavailableError(f"hopsd could not copy the ledger for you: {text}")
    return _store(fds[0])


@contextlib.contextmanager
def hopsd_socket(ledger: Path, owner_uid: int, timeout_s: float) -> Iterator[socket.socket]:
    """A connection to the hopsd that keeps ``ledger``, checked to run as its owner (or
    root); hopsd not answering is said plainly."""
    where = socket_path(ledger)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout_s)
        try:
            conn.connect(str(where))
        except OSError as exc:
            raise LedgerUnavailableError(
                f"the ledger {ledger} is private to hopsd and hopsd does not answer at "
                f"{where} ({exc.strerror or exc}): is hopsd running?"
            ) from exc
        check_peer(conn, owner_uid)
        yield conn


def check_peer(conn: socket.socket, owner_uid: int) -> None:
    """Refuse a server that is neither the ledger's owner nor root (someone else's socket)."""
    _pid, uid, _gid = peer_credentials(conn)
    if uid not in (owner_uid, 0):
        raise LedgerUnavailableError(
            f"the process answering for the ledger runs as uid {uid}, not its owner {owner_uid}"
        )


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """pid, uid and gid of the process at the other end (the kernel's word, SO_PEERCRED)."""
    import struct

    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def _store(fd: int) -> Path:
    """The copy's bytes in a fresh file of the caller's (mode 0600), and the descriptor closed."""
    out, name = tempfile.mkstemp(prefix="hops-ledger-", suffix=".sqlite")
    try:
        with os.fdopen(out, "wb") as dst:
            offset = 0  # pread: hopsd may hand the same open file to several readers
            while chunk := os.pread(fd, 1 << 20, offset):
                dst.write(chunk)
                offset += len(chunk)
    except BaseException:
        os.unlink(name)
        raise
    finally:
        os.close(fd)
    return Path(name)
