"""The HTTP endpoint's cost is bounded by its own limits, not by what clients do.

Idle clients cost no thread, clients that hang up early cost no traceback and
at most one log line per hundred, a head that never completes is cut off, and
the kernel may queue a burst of connections (listen backlog).
"""

from __future__ import annotations

import logging
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from hopsd.daemon.endpoint import Endpoint

BIG = b"x" * (4 << 20)


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    # an earlier test's hopsd main() may have left a root handler on a stderr that
    # pytest has since closed: the endpoint's few log lines go to caplog alone
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    pages = {"/big": lambda: ("text/plain", BIG)}
    served = Endpoint(CollectorRegistry(), {}, "127.0.0.1:0", pages)
    yield served
    served.close()


def _get(port: int, path: str = "/healthz") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


def test_idle_clients_take_no_thread_and_others_are_still_answered(endpoint: Endpoint) -> None:
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", endpoint.port)) for _ in range(100)]
    try:
        for conn in idle:
            conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
        # served after every idle connection was accepted (one accept loop, in order)
        assert _get(endpoint.port).startswith(b"HTTP/1.0 200")
        assert threading.active_count() <= before + 1
    finally:
        for conn in idle:
            conn.close()


def test_clients_that_hang_up_early_leave_no_traceback_and_few_lines(
    endpoint: Endpoint, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="hopsd.endpoint")
    clients = 300
    for _ in range(clients):
        conn = socket.create_connection(("127.0.0.1", endpoint.port))
        conn.sendall(b"GET /big HTTP/1.0\r\n\r\n")
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # a reset while the answer is being written
    # still serving; a request that found every worker's queue full is closed unanswered,
    # and a scraper asks again
    answers = [_get(endpoint.port) for _ in range(5)]
    assert any(a.startswith(b"HTTP/1.0 200") for a in answers), answers
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Error" not in err
    lines = [r for r in caplog.records if r.name == "hopsd.endpoint" and r.levelno >= logging.INFO]
    assert len(lines) <= clients // 100


def test_a_head_that_never_completes_is_cut_off(endpoint: Endpoint) -> None:
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=60) as conn:
        conn.sendall(b"GET /metrics HTTP/1.1\r\n")
        assert conn.recv(1024) == b""  # the server closed it


def test_a_burst_of_connections_fits_the_listen_backlog(endpoint: Endpoint) -> None:
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{endpoint.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert int(out[2]) >= 128  # Send-Q of a listening socket is its backlog
