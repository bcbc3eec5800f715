"""Users' reads of an SQLite ledger: a copy each, made by hopsd, over a Unix socket.

hopsd's SQLite files are private (:func:`hopsd.ledger.private_copy.make_private`):
a user who could read them could also lock them and stop every write. Instead
``hops`` connects to ``LEDGER.sock``; the kernel tells hopsd who the caller is
(``SO_PEERCRED``, which a user cannot forge), and hopsd answers with a
descriptor of a copy trimmed to what Slurm's ``PrivateData`` lets that user
see (root, hopsd's own account, SlurmUser and Slurm operators see all).

One thread serves requests one at a time, each with a timeout, and a viewer's
copy is handed out again for :data:`REUSE_S` (the same unlinked file, read
with ``pread``): a user who floods or stalls the socket costs hopsd at most one
copy per :data:`REUSE_S` and delays other users' reads, never a tick (the
copy is made on a WAL read connection of its own, which the writer does not
wait for).

The same socket answers ``hops submit --test-only`` for such users
(:class:`hopsd.daemon.test_only.Forecaster`): their copy holds only what they
may see, and a forecast without the other users' jobs would be wrong.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pwd
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hopsd.core.privacy import PrivateData, Viewer
from hopsd.daemon.test_only import FORECAST, MAX_TAG_BYTES, Forecaster, ForecastRefused
from hopsd.ledger.private_copy import (
    REQUEST,
    copy_for,
    make_private,
    peer_credentials,
    socket_path,
)
from hopsd.slurm.privacy import SlurmPrivacy

log = logging.getLogger("hopsd.readservice")

#: How long Slurm's privacy settings are trusted before they are asked again.
PRIVACY_TTL_S = 300.0
#: A client sends its request right after connecting: one that stalls waits no longer.
CLIENT_TIMEOUT_S = 2.0
#: How long one viewer's copy is handed out again instead of making a new one.
REUSE_S = 2.0


class Privacy:
    """Slurm's privacy settings, asked again after :data:`PRIVACY_TTL_S` (thread-safe)."""

    def __init__(self, ask: Callable[[], SlurmPrivacy]) -> None:
        self._ask = ask
        self._lock = threading.Lock()
        self._cached: tuple[float, SlurmPrivacy] | None = None

    def get(self) -> SlurmPrivacy:
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] > PRIVACY_TTL_S:
                self._cached = (now, self._ask())
            return self._cached[1]

    def rules(self) -> PrivateData:
        return self.get().rules


class ReadService:
    """Serves trimmed copies of the ledger at ``LEDGER.sock`` until :meth:`close`."""

    def __init__(
        self,
        ledger: Path,
        privacy: Callable[[], SlurmPrivacy],
        forecaster: Forecaster | None = None,
    ) -> None:
        self.ledger = ledger
        self.path = socket_path(ledger)
        self.privacy = privacy
        self.forecaster = forecaster
        self._copies: dict[Viewer, tuple[float, int]] = {}
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self.served = 0

    def start(self) -> None:
        """Bind the socket (any user may connect: who they are is asked per request)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self._answering():
            sock.close()
            raise OSError(f"another hopsd already answers at {self.path}")
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        sock.bind(str(self.path))
        self.path.chmod(0o666)
        sock.listen(64)
        sock.settimeout(1.0)
        self._sock = sock
        threading.Thread(target=self._loop, name="hopsd-reads", daemon=True).start()
        log.info("event=reads-serving socket=%s", self.path)

    def close(self) -> None:
        self._stop.set()
        for _made, fd in self._copies.values():
            os.close(fd)
        self._copies.clear()
        if self._sock is not None:
            self._sock.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def viewer(self, uid: int) -> Viewer:
        """Who a uid is to hops: trusted as Slurm trusts it."""
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            return Viewer(f"uid{uid}")
        trusted = uid in (0, os.geteuid()) or name in self.privacy().trusted
        return Viewer(name, trusted)

    def _copy(self, viewer: Viewer) -> int:
        """The viewer's copy: the one made less than :data:`REUSE_S` ago, or a new one."""
        now = time.monotonic()
        for old in [v for v, (made, _) in self._copies.items() if now - made > REUSE_S]:
            os.close(self._copies.pop(old)[1])
        if viewer not in self._copies:
            self._copies[viewer] = (now, copy_for(self.ledger, viewer, self.privacy().rules))
        return self._copies[viewer][1]

    def _answering(self) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(str(self.path))
            except OSError:
                return False
            return True

    def _loop(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            with conn:
                self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        """One request: who asks, what (a copy, or a forecast), the answer; a failure is
        theirs alone."""
        conn.settimeout(CLIENT_TIMEOUT_S)
        try:
            _pid, uid, _gid = peer_credentials(conn)
            verb = _read_line(conn, len(FORECAST))
            if verb == REQUEST:
                fd = self._copy(self.viewer(uid))
                socket.send_fds(conn, [b"ok\n"], [fd])
            elif verb == FORECAST and self.forecaster is not None:
                self._forecast(conn, self.viewer(uid))
            else:
                return
            self.served += 1
        except ForecastRefused as exc:
            with contextlib.suppress(OSError):
                conn.sendall(f"refused: {exc}".encode()[:1000])
        except Exception as exc:  # one caller's failure must not stop the service
            log.warning("event=read-request-failed error=%r", str(exc))
            with contextlib.suppress(OSError):
                conn.sendall(f"{type(exc).__name__}: {exc}".encode()[:1000])

    def _forecast(self, conn: socket.socket, viewer: Viewer) -> None:
        """The viewer's ``--test-only`` answer, forecast on everything hopsd sees."""
        assert self.forecaster is not None
        line = _read_line(conn, MAX_TAG_BYTES)
        if line is None:
            raise ForecastRefused(f"a job's tag is one line of at most {MAX_TAG_BYTES} bytes")
        hides = self.privacy().rules.jobs and not viewer.privileged
        text = line.decode(errors="replace").strip()
        payload = self.forecaster.answer(text, viewer.user, hides)
        conn.sendall(b"ok\n" + json.dumps(payload).encode())


def _read_line(conn: socket.socket, limit: int) -> bytes | None:
    """Bytes up to and with the first newline, read one at a time so nothing after it is
    taken; None past ``limit`` bytes or at the end of the stream."""
    line = bytearray()
    while len(line) < limit:
        byte = conn.recv(1)
        if not byte:
            return None
        line += byte
        if byte == b"\n":
            return bytes(line)
    return None


def serve_reads(
    ledger_url: str, privacy: Callable[[], SlurmPrivacy], forecaster: Forecaster | None = None
) -> ReadService | None:
    """For an SQLite ledger: make its files private and serve users' copies (else None).

    A socket another hopsd serves (a standby's, or the leader's) is left to it.
    """
    from hopsd.ledger.reader import parse_target

    target = parse_target(ledger_url)
    if target.backend != "sqlite":
        return None
    ledger = Path(target.path)
    changed = make_private(ledger)
    if changed:
        log.warning(
            "event=ledger-made-private files=%s mode=0600 reason=%r",
            ",".join(changed),
            "users who can read SQLite files can lock them; they read copies from hopsd",
        )
    service = ReadService(ledger, privacy, forecaster)
    try:
        service.start()
    except OSError as exc:
        log.warning("event=reads-not-served socket=%s error=%r", service.path, str(exc))
        return None
    return service
