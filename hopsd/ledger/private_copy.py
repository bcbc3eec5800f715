"""An SQLite ledger users cannot lock, and the copies they read instead.

SQLite's locks are ``fcntl`` byte-range locks, and a *shared* lock needs only
read access: anyone who can open the ledger or its ``-shm`` index for reading
can hold the WAL write-lock byte and stop every write of hopsd. So hopsd keeps
its SQLite files private (mode 0600: :func:`make_private`), and a user reads a
copy made for them (:func:`copy_for`): ``VACUUM INTO`` on hopsd's own read
connection (a WAL reader, which never blocks the writer), then trimmed to what
Slurm's ``PrivateData`` lets that user see (:mod:`hopsd.core.privacy`), with
``secure_delete`` so nothing removed stays in the file's free pages. The copy
is handed over as an open descriptor of an unlinked file (see
:mod:`hopsd.daemon.readservice`): the user's locks on it reach nobody else.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import tempfile
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
    """A read-only descriptor of a copy of ``ledger`` trimmed for ``viewer``.

    The copy is written in the ledger's directory (hopsd's, mode 0600 by
    ``mkstemp``) and unlinked before the descriptor is returned: no path to it
    remains, so no other user can open it.
    """
    fd, name = tempfile.mkstemp(prefix=".hops-copy-", dir=ledger.parent)
    os.close(fd)
    try:
        source = sqlite3.connect(f"file:{quote(str(ledger))}?mode=ro", uri=True, timeout=5.0)
        try:
            source.execute("VACUUM INTO ?", (name,))
        finally:
            source.close()
        if not viewer.privileged and rules.any:
            _trim(name, viewer.user, rules)
        return os.open(name, os.O_RDONLY)
    finally:
        os.unlink(name)


def _trim(path: str, user: str, rules: PrivateData) -> None:
    """Remove from the copy what ``user`` may not see; overwritten, not just unlinked."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("BEGIN")
        if rules.jobs:
            conn.execute('DELETE FROM jobs WHERE "user" != ?', (user,))
            conn.execute('DELETE FROM refusals WHERE "user" != ?', (user,))
            conn.execute("DELETE FROM intents WHERE job_id IS NULL")
            conn.execute("UPDATE rounds SET note = ''")
        if rules.usage:
            conn.execute('DELETE FROM usage WHERE "user" != ?', (user,))
        if rules.accounts:
            _hide_accounts(conn, user)
        conn.execute("COMMIT")
        conn.execute("VACUUM")
    finally:
        conn.close()


def _hide_accounts(conn: sqlite3.Connection, user: str) -> None:
    """Other users' work with its account blanked; their usage summed over accounts."""
    conn.execute("UPDATE jobs SET account = '' WHERE \"user\" != ?", (user,))
    conn.execute(
        'CREATE TEMP TABLE merged AS SELECT "user", interval_start, max(interval_end) AS e, '
        'sum(gpu_s) AS g, sum(gpu_s_norm) AS n FROM usage WHERE "user" != ? '
        '  GROUP BY "user", interval_start',
        (user,),
    )
    conn.execute('DELETE FROM usage WHERE "user" != ?', (user,))
    conn.execute(
        'INSERT INTO usage ("user", account, interval_start, interval_end, gpu_s, gpu_s_norm) '
        "SELECT \"user\", '', interval_start, e, g, n FROM merged"
    )
    conn.execute("DROP TABLE merged")


def fetch_copy(ledger: Path, owner_uid: int, timeout_s: float = 30.0) -> Path:
    """Ask hopsd for a copy of ``ledger`` and store it in a file of the caller's own.

    The answer counts only from a server running as the ledger's owner (the
    socket sits in hopsd's directory, and its peer is checked too). The file is
    the caller's to remove.
    """
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
        _check_peer(conn, owner_uid)
        conn.sendall(REQUEST)
        reply, fds, _flags, _addr = socket.recv_fds(conn, MAX_REPLY, 1)
    if not fds:
        text = reply.decode(errors="replace").strip() or "no answer"
        raise LedgerUnavailableError(f"hopsd could not copy the ledger for you: {text}")
    return _store(fds[0])


def _check_peer(conn: socket.socket, owner_uid: int) -> None:
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
