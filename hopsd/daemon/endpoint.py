"""hopsd's HTTP endpoint: ``/metrics`` for Prometheus, ``/healthz`` for probes, and the
read-only status page (``/status``) with the JSON documents behind it.

``/healthz`` answers 200 when every check passes and 503 otherwise, with a JSON
body naming each failing check and why (ledger unreachable, Slurm failing, no
tick for too long), so a load balancer or an on-call admin sees the cause
without reading logs. The server (:mod:`hopsd.daemon.httpserve`) runs a few
daemon threads beside the scheduler, however many clients connect.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from hopsd.config_checks import split_address
from hopsd.daemon.httpserve import BoundedHandler, BoundedServer
from hopsd.views.routes import NotThere, Page, Under

log = logging.getLogger("hopsd.endpoint")

#: A named check: returns None when fine, else the reason it is not.
Check = Callable[[], str | None]


def health(checks: Mapping[str, Check]) -> tuple[int, dict[str, object]]:
    """Run every check; a check that raises counts as failing with its error."""
    problems: dict[str, str] = {}
    for name, check in checks.items():
        try:
            reason = check()
        except Exception as exc:  # a broken check must not hide the others
            reason = f"check failed: {exc}"
        if reason:
            problems[name] = reason
    body: dict[str, object] = {"status": "unhealthy" if problems else "ok", "problems": problems}
    return (503 if problems else 200), body


class Endpoint:
    """The endpoint's server and its accept thread; ``port`` is the bound one (port 0)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        checks: Mapping[str, Check],
        address: str,
        pages: Mapping[str, Page | Under] | None = None,
    ) -> None:
        host, port = split_address("metrics.address", address)
        handler = _handler(registry, checks, pages or {})
        self.server = BoundedServer((host or "0.0.0.0", port), handler)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="hopsd-http", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _below(pages: Mapping[str, Page | Under], path: str) -> Page | None:
    """The page of ``path`` from the :class:`Under` whose prefix it has (None: not one)."""
    for prefix, under in pages.items():
        if isinstance(under, Under) and path.startswith(prefix) and len(path) > len(prefix):
            rest = path[len(prefix) :]

            def page(under: Under = under, rest: str = rest) -> tuple[str, bytes]:
                found = under.answer(rest)
                if found is None:
                    raise NotThere(rest)
                return found

            return page
    return None


def _handler(
    registry: CollectorRegistry, checks: Mapping[str, Check], pages: Mapping[str, Page | Under]
) -> type[BoundedHandler]:
    class Handler(BoundedHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                status, body = health(checks)
                self._send(status, "application/json", json.dumps(body).encode() + b"\n")
            elif path in pages and not isinstance(page := pages[path], Under):
                self._page(page)
            elif (below := _below(pages, path)) is not None:
                self._page(below)
            elif path in ("/metrics", "/"):
                encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
                self._send(200, content_type, encoder(registry))
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found\n")

        def _page(self, page: Page) -> None:
            try:
                content_type, body = page()
            except NotThere:
                self._send(404, "text/plain; charset=utf-8", b"not found\n")
                return
            except Exception as exc:  # the ledger away: say so, keep serving
                log.warning("event=page-failed path=%s error=%r", self.path, str(exc))
                self._send(503, "text/plain; charset=utf-8", f"unavailable: {exc}\n".encode())
                return
            self._send(200, content_type, body)

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
