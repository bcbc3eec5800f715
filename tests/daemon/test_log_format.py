"""hopsd's log lines: ISO 8601 UTC times, no Python reprs, one JSON object per line on request."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopsd.daemon.logging import JsonFormatter, KeyValueFormatter, iso, tokens
from hopsd.daemon.service import Service
from hopsd.daemon.tick import Tick
from hopsd.slurm.tag import HopsTag

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _record(msg: str, *args: object, exc: bool = False) -> logging.LogRecord:
    record = logging.LogRecord("hopsd.test", logging.INFO, __file__, 1, msg, args, None)
    record.created = 1764561906.5
    if exc:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            import sys

            record.exc_info = sys.exc_info()
    return record


def test_key_value_line_quotes_values_as_json_never_as_python_reprs() -> None:
    line = KeyValueFormatter().format(
        _record("event=refuse job=%s types=%s reason=%r", "7", ["a100", "k80"], "it's 'bad' here")
    )
    assert line.startswith("ts=2025-12-01T04:05:06.500Z level=info logger=hopsd.test ")
    assert 'types=["a100","k80"]' in line
    assert "reason=\"it's 'bad' here\"" in line
    assert "['" not in line and "reason='" not in line


def test_json_line_is_an_object_with_the_message_keys() -> None:
    line = JsonFormatter().format(
        _record(
            "event=enact job=%s action=%s reason=%r took_s=%.3f note='a literal note'",
            "7",
            "start a100 n1:2",
            'say "hi"\nnewline',
            0.25,
        )
    )
    body = json.loads(line)
    assert ISO.match(body["ts"]) and body["ts"] == "2025-12-01T04:05:06.500Z"
    assert body["event"] == "enact" and body["job"] == 7
    assert body["action"] == "start a100 n1:2"
    assert body["reason"] == 'say "hi"\nnewline'
    assert body["took_s"] == 0.25 and body["note"] == "a literal note"
    assert "msg" not in body


def test_json_keeps_free_text_and_traceback_and_never_overwrites_its_own_keys() -> None:
    body = json.loads(
        JsonFormatter().format(_record("event=x level=%s the loop goes on", "9", exc=True))
    )
    assert body["level"] == "info" and body["field.level"] == 9
    assert body["msg"] == "the loop goes on"
    assert "RuntimeError: boom" in body["traceback"]


@given(st.text(max_size=40))
def test_any_string_value_reads_back_from_the_key_value_line(value: str) -> None:
    line = KeyValueFormatter().format(_record("event=x reason=%r job=%s", value, "1"))
    found = dict((k, v) for k, v, _ in tokens(line) if k is not None)
    assert found["reason"] == value
    assert found["job"] == 1 and found["event"] == "x"


def test_iso_is_utc() -> None:
    assert iso(0.0) == "1970-01-01T00:00:00.000Z"


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    root.setLevel(old_level)


def test_shadow_daemon_logs_json_objects_and_says_a_decision_once(
    config, port, sessions, clock, json_log
):
    port.add_job(HopsTag((1,), 1e7))
    service = Service(Tick(config, port, sessions, clock=clock, shadow=True))
    for _ in range(6):
        service.run_once()
        clock.advance(1)
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    assert lines and all(ISO.match(line["ts"]) for line in lines)
    would = [line for line in lines if line.get("event") == "would-enact"]
    assert len(would) == 1
    assert would[0]["action"].startswith("start ") and would[0]["shadow"] is True
    assert any(line.get("event") == "adopt" for line in lines)
