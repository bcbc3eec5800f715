"""Every command's help: flags show no value placeholder (typer's rich help printed ``<bool>``
beside each one), while options that take a value still show what they take."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from hops_cli.launch import COMMANDS
from hops_cli.main import app

runner = CliRunner()


def _db_commands() -> list[list[str]]:
    group = typer.main.get_command(app)
    ctx = group.make_context("hops", ["db"])
    db = group.get_command(ctx, "db")  # type: ignore[attr-defined]
    return [["db", name, "--help"] for name in db.list_commands(ctx)]


HELPS = [["--help"]] + [[c, "--help"] for c in COMMANDS] + _db_commands()


@pytest.mark.parametrize("argv", HELPS, ids=[" ".join(a[:-1]) or "hops" for a in HELPS])
def test_help_shows_no_placeholder_for_flags(argv: list[str]) -> None:
    result = runner.invoke(app, argv, env={"COLUMNS": "200"}, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout


def test_options_with_values_keep_their_placeholder() -> None:
    text = runner.invoke(app, ["status", "--help"], env={"COLUMNS": "200"}).stdout
    window = next(line for line in text.splitlines() if "--window" in line)
    # typer spells the placeholder <float> (0.27 on) or FLOAT (0.26)
    assert re.search(r"--window\s+(<float>|FLOAT)\s", window), window
    me = next(line for line in text.splitlines() if "--me " in line)
    assert "<" not in me
