"""A small HTTP/1.0 server whose cost stays bounded whatever its clients do.

hopsd's endpoint is reachable by every user of the service host, so a client
that connects and never finishes its request, or hangs up half-way, must cost
hopsd neither a thread, nor a traceback in its log, nor its tick interval:

* one thread waits (``selectors``) on every connection until its request head
  is complete; a client still sending gets no thread, only a slot among
  ``max_connections`` and a buffer of at most ``MAX_HEAD_BYTES``; when every
  slot is taken the longest-waiting connection gives its slot to the new one,
  so a scraper that sends its request at once is served while slow clients
  crowd the endpoint;
* the head must arrive whole within ``head_timeout_s`` -- a deadline, not a
  per-read timeout, so a client trickling a byte a second is cut off too;
* complete requests go to a fixed pool of ``workers`` threads through a
  bounded queue (full: the connection is closed, a scraper retries); answers
  are written under ``write_timeout_s``; one request per connection;
* clients that fail (cut off, hung up, refused) are counted, and logged one
  line per ``LOG_EVERY`` of them, never a line or a traceback each.
"""

from __future__ import annotations

import contextlib
import io
import logging
import queue
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

log = logging.getLogger("hopsd.endpoint")

MAX_HEAD_BYTES = 8192
LOG_EVERY = 100
WORKERS = 4
PENDING = 32
MAX_CONNECTIONS = 256
BACKLOG = 128
HEAD_TIMEOUT_S = 2.0
WRITE_TIMEOUT_S = 5.0


class ClientFailures:
    """Counts clients that got no answer, logging one line per ``LOG_EVERY`` of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.by_cause: dict[str, int] = {}

    def note(self, cause: str) -> None:
        with self._lock:
            self.count += 1
            self.by_cause[cause] = self.by_cause.get(cause, 0) + 1
            if self.count % LOG_EVERY:
                return
            causes = " ".join(f"{k}={v}" for k, v in sorted(self.by_cause.items()))
        log.warning("event=http-clients-failed total=%d %s", self.count, causes)


def head_complete(data: bytes) -> bool:
    return b"\r\n\r\n" in data or b"\n\n" in data


class _SocketWriter(io.BufferedIOBase):
    """Writes each block whole (``sendall``), under the socket's timeout."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


class BoundedHandler(BaseHTTPRequestHandler):
    """Answers one request whose head the server has already read; never raises to it."""

    server: BoundedServer  # type: ignore[assignment]
    protocol_version = "HTTP/1.0"

    def setup(self) -> None:
        self.connection, head = self.request
        self.rfile = io.BytesIO(head)
        self.wfile = _SocketWriter(self.connection)

    def handle(self) -> None:
        self.close_connection = True
        try:
            self.handle_one_request()
        except TimeoutError:
            self.server.failures.note("write-timeout")
        except OSError:  # reset, broken pipe: the client went away
            self.server.failures.note("disconnected")

    def finish(self) -> None:
        """Nothing buffered to flush: answers are written straight to the socket."""

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would flood the log; nothing is logged per request."""


@dataclass
class _Waiting:
    """A connection whose request head is still arriving."""

    address: Any
    deadline: float
    data: bytes = b""


class BoundedServer:
    """Listens on ``address``; :meth:`serve_forever` waits on connections until :meth:`shutdown`."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BoundedHandler],
        *,
        workers: int = WORKERS,
        max_connections: int = MAX_CONNECTIONS,
        head_timeout_s: float = HEAD_TIMEOUT_S,
        write_timeout_s: float = WRITE_TIMEOUT_S,
    ) -> None:
        self.socket = socket.create_server(address, backlog=BACKLOG)
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self.handler = handler
        self.max_connections = max_connections
        self.head_timeout_s = head_timeout_s
        self.write_timeout_s = write_timeout_s
        self.failures = ClientFailures()
        self._waiting: dict[socket.socket, _Waiting] = {}
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.socket, selectors.EVENT_READ)
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._queue: queue.Queue[tuple[socket.socket, bytes, Any] | None] = queue.Queue(PENDING)
        self._workers = [
            threading.Thread(target=self._work, name=f"hopsd-http-{i}", daemon=True)
            for i in range(workers)
        ]
        for worker in self._workers:
            worker.start()

    def serve_forever(self) -> None:
        try:
            while not self._stop.is_set():
                for key, _ in self._selector.select(timeout=0.2):
                    if key.fileobj is self.socket:
                        self._accept()
                    else:
                        self._read(key.fileobj)  # type: ignore[arg-type]
                self._expire(time.monotonic())
        finally:
            self._stopped.set()

    def _accept(self) -> None:
        """Take every connection the kernel holds; beyond ``max_connections`` close it."""
        while True:
            try:
                conn, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors, or the client left the backlog
                self.failures.note("accept")
                return
            if len(self._waiting) >= self.max_connections:
                self._drop(next(iter(self._waiting)), "evicted")
            conn.setblocking(False)
            deadline = time.monotonic() + self.head_timeout_s
            self._waiting[conn] = _Waiting(address, deadline)
            self._selector.register(conn, selectors.EVENT_READ)

    def _read(self, conn: socket.socket) -> None:
        waiting = self._waiting[conn]
        try:
            chunk = conn.recv(MAX_HEAD_BYTES + 1 - len(waiting.data))
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(conn, "disconnected")
            return
        tail = waiting.data[-3:] + chunk
        waiting.data += chunk
        if head_complete(tail):
            self._dispatch(conn, waiting)
        elif len(waiting.data) > MAX_HEAD_BYTES:
            self._drop(conn, "head-too-large")

    def _dispatch(self, conn: socket.socket, waiting: _Waiting) -> None:
        self._selector.unregister(conn)
        del self._waiting[conn]
        try:
            self._queue.put_nowait((conn, waiting.data, waiting.address))
        except queue.Full:
            self.failures.note("busy")
            conn.close()

    def _expire(self, now: float) -> None:
        """Drop connections past their deadline; accepted in deadline order, so the
        scan stops at the first one still in time."""
        late = []
        for conn, waiting in self._waiting.items():
            if waiting.deadline > now:
                break
            late.append(conn)
        for conn in late:
            self._drop(conn, "incomplete")

    def _drop(self, conn: socket.socket, cause: str) -> None:
        self._selector.unregister(conn)
        del self._waiting[conn]
        self.failures.note(cause)
        conn.close()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            conn, head, address = item
            try:
                conn.setblocking(True)
                conn.settimeout(self.write_timeout_s)
                self.handler((conn, head), address, self)  # type: ignore[arg-type]
            except Exception:  # a handler bug must not kill the worker nor flood the log
                log.debug("event=http-handler-failed", exc_info=True)
                self.failures.note("error")
            finally:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_WR)
                conn.close()

    def shutdown(self) -> None:
        """Stop the waiting loop (from another thread) and wait for it."""
        self._stop.set()
        self._stopped.wait(timeout=5.0)

    def server_close(self) -> None:
        """Close every connection and the listening socket; end the workers."""
        for conn in list(self._waiting):
            self._selector.unregister(conn)
            conn.close()
        self._waiting.clear()
        self._selector.close()
        self.socket.close()
        while True:  # requests still queued are dropped, not served
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].close()
        for _ in self._workers:
            self._queue.put(None)
        for worker in self._workers:
            worker.join(timeout=1.0)
