"""Structured logging for hopsd: one ``key=value`` line, or one JSON object, per event.

Modules log ``event=... job=%s reason=%r`` messages through the standard
library. This module turns each into a record of fields before printing it:

* a value given after ``key=`` is written so it can be read back: bare when it
  is a plain word, else as a JSON string (``reason="round 3: start a100
  n1:2"``); lists and mappings as JSON. ``%r`` never puts a Python repr in
  the log;
* times are ISO 8601 in UTC with milliseconds (``2026-12-01T04:05:06.123Z``);
* ``HOPS_LOG_FORMAT=json`` prints every record as one JSON object per line:
  ``ts``, ``level``, ``logger``, then the message's own keys (numbers as
  numbers), free text under ``msg`` and a traceback under ``traceback``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

# A %-conversion of the logging format (what ``msg % args`` would expand).
_SPEC = re.compile(r"%(?:\(\w+\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")
_PLAIN = re.compile(r"[^\s\"'=\\]+")
_KEY = re.compile(r"[A-Za-z_][\w.\-]*=")
_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
RESERVED = ("ts", "level", "logger", "msg", "traceback")


def iso(epoch: float) -> str:
    """``epoch`` (Unix seconds) as ISO 8601 UTC with milliseconds, e.g. for log values."""
    stamp = datetime.fromtimestamp(epoch, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def value_text(value: object, *, keep_str: bool = False) -> str:
    """One log value as text that reads back unambiguously (bare word or JSON).

    With ``keep_str`` (``%r``: the caller meant a string) a string that would
    read back as a number, boolean or null is quoted too.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple | set | frozenset | Mapping):
        items = dict(value) if isinstance(value, Mapping) else list(value)
        return json.dumps(items, separators=(",", ":"), default=str)
    text = str(value)
    plain = _PLAIN.fullmatch(text) is not None
    if plain and keep_str and isinstance(value, str):
        plain = _scalar(text) == text
    return text if plain else json.dumps(text)


def render(record: logging.LogRecord) -> str:
    """The record's message with every ``key=%s``/``%r`` value made readable."""
    args = record.args
    msg = str(record.msg)
    if not args or isinstance(args, Mapping):
        return record.getMessage()
    try:
        out: list[str] = []
        pos = index = 0
        for match in _SPEC.finditer(msg):
            out.append(msg[pos : match.start()])
            pos = match.end()
            conversion = match.group(1)
            if conversion == "%":
                out.append("%")
                continue
            arg = args[index]
            index += 1
            after_key = msg[: match.start()].endswith("=")
            if conversion == "r" or (conversion == "s" and after_key):
                out.append(value_text(arg, keep_str=conversion == "r"))
            else:
                out.append(match.group(0) % (arg,))
        out.append(msg[pos:])
        if index != len(args):
            return record.getMessage()
        return "".join(out)
    except (TypeError, ValueError, IndexError):
        return record.getMessage()


#: One piece of a message: (key, value, text as written) of a pair, or (None, text, text).
Token = tuple[str | None, Any, str]


def tokens(message: str) -> list[Token]:
    """Split a rendered message into ``key=value`` pairs and free text, in order.

    Values are typed for JSON (numbers, booleans, JSON strings, lists and
    objects decoded); ``'single-quoted'`` literals of the format strings become
    strings. The text of each value as written is kept for key=value output.
    """
    out: list[Token] = []
    decoder = json.JSONDecoder()
    i, n = 0, len(message)
    while i < n:
        if message[i].isspace():
            i += 1
            continue
        key = _KEY.match(message, i)
        if key is None:
            end = _word_end(message, i)
            out.append((None, message[i:end], message[i:end]))
            i = end
            continue
        name, i = key.group(0)[:-1], key.end()
        start = i
        value: Any
        if i < n and message[i] in '"[{':
            try:
                value, i = decoder.raw_decode(message, i)
                raw = message[start:i]
            except ValueError:
                i = _word_end(message, i)
                value = raw = message[start:i]
        elif i < n and message[i] == "'":
            close = message.find("'", i + 1)
            close = n if close < 0 else close
            value, i = message[i + 1 : close], close + 1
            raw = value_text(value)
        else:
            i = _word_end(message, i)
            raw = message[start:i]
            value = _scalar(raw)
        out.append((name, value, raw))
        end = _word_end(message, i)  # text glued to a value ("error=...; stopping")
        if end > i:
            out.append((None, message[i:end], message[i:end]))
            i = end
    return out


def _word_end(message: str, start: int) -> int:
    end = start
    while end < len(message) and not message[end].isspace():
        end += 1
    return end


def _scalar(word: str) -> Any:
    if _INT.fullmatch(word):
        return int(word)
    if _FLOAT.fullmatch(word):
        return float(word)
    return {"true": True, "false": False, "null": None}.get(word, word)


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        head = f"ts={iso(record.created)} level={record.levelname.lower()} logger={record.name}"
        parts = [head]
        for key, _, raw in tokens(render(record)):
            parts.append(raw if key is None else f"{key}={raw}")
        line = " ".join(parts)
        if record.exc_info:
            line += " traceback=" + json.dumps(self.formatException(record.exc_info))
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        text: list[str] = []
        for key, value, raw in tokens(render(record)):
            if key is None:
                text.append(raw)
            else:
                body[f"field.{key}" if key in RESERVED else key] = value
        if text:
            body["msg"] = " ".join(text)
        if record.exc_info:
            body["traceback"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str)


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
