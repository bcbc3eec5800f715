"""Structured logging for hopsd: one ``key=value`` (or JSON) line per event.

Modules log messages that are already ``event=... job=...`` pairs; this adds a
UTC timestamp, the level and the logger, so the lines can be grepped or shipped
to a log store as they are. ``HOPS_LOG_FORMAT=json`` wraps each line in JSON.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = f"ts={stamp}.{int(record.msecs):03d}Z level={record.levelname.lower()} "
        line += f"logger={record.name} {record.getMessage()}"
        if record.exc_info:
            line += " traceback=" + json.dumps(self.formatException(record.exc_info))
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body = {
            "ts": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            body["traceback"] = self.formatException(record.exc_info)
        return json.dumps(body)


def setup_logging(level: str | None = None) -> None:
    """Configure the root logger once (stderr; systemd's journal picks it up)."""
    handler = logging.StreamHandler(sys.stderr)
    fmt = os.environ.get("HOPS_LOG_FORMAT", "kv")
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level or os.environ.get("HOPS_LOG_LEVEL", "INFO"))
    # The solver and the scheduler library are chatty at INFO.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
