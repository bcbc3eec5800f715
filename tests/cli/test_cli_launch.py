"""The hops executable's quick answers (version, command-name completion) and lazy imports.

Each is checked against what typer itself prints, so the shortcut cannot drift
from the real command group.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from hops_cli.launch import COMMANDS, quick_answer
from hops_cli.main import app

HOPS = str(Path(sys.executable).parent / "hops")
TYPER_ONLY = [sys.executable, "-c", "from hops_cli.main import app; app(prog_name='hops')"]


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def test_command_list_is_the_groups() -> None:
    group = typer.main.get_command(app)
    ctx = group.make_context("hops", ["version"])
    assert tuple(group.list_commands(ctx)) == COMMANDS  # type: ignore[attr-defined]


@pytest.mark.parametrize("typed", ["", "s", "st", "h", "db", "zz"])
def test_name_completion_matches_typer(typed: str) -> None:
    env = {"_HOPS_COMPLETE": "complete_bash", "COMP_WORDS": f"hops {typed}", "COMP_CWORD": "1"}
    quick = _run([HOPS], **env)
    slow = _run(TYPER_ONLY, **env)
    assert quick.returncode == slow.returncode == 0
    assert quick.stdout.split() == slow.stdout.split()
    assert quick_answer([], env) is not None  # answered without typer


STATUS_LINES = [
    "hops status -",
    "hops status --no",
    "hops status --me -",
    "hops status -u x -a --",
    "hops status -ah -",
    "hops status 26_1 --window 2 -",
    "hops status -o",
]


@pytest.mark.parametrize("line", STATUS_LINES)
def test_status_option_completion_matches_typer(line: str) -> None:
    env = {"_HOPS_COMPLETE": "complete_bash", "COMP_WORDS": line}
    env["COMP_CWORD"] = str(len(line.split()) - 1)
    assert quick_answer([], env) is not None  # answered without typer
    quick = _run([HOPS], **env)
    slow = _run(TYPER_ONLY, **env)
    assert quick.returncode == slow.returncode == 0
    assert quick.stdout.split() == slow.stdout.split()


@pytest.mark.parametrize(
    ("line", "cword"),
    [("hops submit --g", 2), ("hops status -o ", 3), ("hops status -o x", 3), ("hops status x", 2)],
)
def test_other_completion_goes_to_typer(line: str, cword: int) -> None:
    env = {"_HOPS_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(cword)}
    assert quick_answer([], env) is None


def test_version_answers_without_typer_or_the_ledger() -> None:
    probe = (
        "import sys; from hops_cli.launch import quick_answer; "
        "print(quick_answer(['version'], {})); "
        "print(sorted(m for m in ('typer', 'sqlalchemy', 'rich', 'numpy') if m in sys.modules))"
    )
    out = _run([sys.executable, "-c", probe]).stdout.splitlines()
    assert out == [f"hops {__import__('hopsd').__version__}", "[]"]
    assert _run([HOPS, "version"]).stdout == _run([*TYPER_ONLY, "version"]).stdout


def test_the_command_group_loads_no_command_module() -> None:
    probe = (
        "import sys, hops_cli.main; "
        "heavy = {'sqlalchemy', 'alembic', 'numpy', 'hops_cli.status', 'hops_cli.simulate', "
        "'hops_cli.fairness', 'hopsd.ledger.unit', 'hopsd.sim'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    assert _run([sys.executable, "-c", probe]).stdout.strip() == "[]"


def test_commands_built_on_first_use_have_no_completion_options_of_their_own() -> None:
    from typer.testing import CliRunner

    text = CliRunner().invoke(app, ["status", "--help"]).stdout
    assert "--noheader" in text and "--install-completion" not in text
