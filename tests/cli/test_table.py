"""Tables on a terminal: boxed while short enough to read, plain columns beyond."""

from __future__ import annotations

import io

import pytest

from hops_cli import table
from hops_cli.table import BOXED_MAX_ROWS, Layout, render
from hopsd.views.cells import rows


class Terminal(io.StringIO):
    """Standard output as a terminal shows it to the table code."""

    def isatty(self) -> bool:
        return True


def drawn(rows: int, monkeypatch: pytest.MonkeyPatch) -> str:
    out = Terminal()
    monkeypatch.setattr(table.sys, "stdout", out)
    monkeypatch.setenv("COLUMNS", "120")
    body = [[str(k), f"job{k}"] for k in range(rows)]
    render("hops jobs", ("JOBID", "NAME"), body, Layout())
    return out.getvalue()


def test_a_short_table_on_a_terminal_is_boxed(monkeypatch: pytest.MonkeyPatch) -> None:
    text = drawn(3, monkeypatch)
    assert "━" in text or "─" in text
    assert "job2" in text


def test_a_long_table_on_a_terminal_prints_as_plain_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = drawn(BOXED_MAX_ROWS + 1, monkeypatch)
    lines = text.splitlines()
    assert lines[0].split() == ["JOBID", "NAME"]
    assert len(lines) == BOXED_MAX_ROWS + 2
    assert lines[-1].split() == [str(BOXED_MAX_ROWS), f"job{BOXED_MAX_ROWS}"]


def test_plain_columns_print_cells_as_written_aligned() -> None:
    """A cell is text, never a format: a job named ``100%s`` prints as named."""
    lines = table.plain(("JOBID", "NAME", "REASON"), [("7", "100%s", "-"), ("12", "%(x)d", "")])
    assert lines == ["JOBID  NAME   REASON", "7      100%s  -", "12     %(x)d"]


def test_rows_pick_the_asked_columns_in_order_even_one() -> None:
    jobs = [{"A": "a1", "B": "b1"}, {"A": "a2", "B": "b2"}]
    assert rows(jobs, ["B", "A"], dict) == [("b1", "a1"), ("b2", "a2")]
    assert rows(jobs, ["B"], dict) == [("b1",), ("b2",)]
    assert table.plain(["B"], rows(jobs, ["B"], dict)) == ["B", "b1", "b2"]
