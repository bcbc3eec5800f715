"""The site's references are what the code declares: regenerated here and compared.

A command, flag, configuration key or metric added, renamed or described
anew without ``python docs/gen_reference.py`` fails this test, naming that
command. The pages must not depend on the terminal either.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from by_path import load_by_path

REPO = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    return load_by_path("gen_reference", REPO / "docs" / "gen_reference.py")


GEN = _generator()


@pytest.mark.parametrize("page", sorted(GEN.PAGES))
def test_committed_reference_is_up_to_date(page: str) -> None:
    committed = (REPO / "docs" / "reference" / page).read_text()
    assert GEN.PAGES[page]() == committed, (
        f"docs/reference/{page} is out of date with the code; regenerate it with: {GEN.REGENERATE}"
    )


def test_the_pages_do_not_depend_on_the_terminal(tmp_path: Path) -> None:
    pages = {}
    for columns in ("40", "300"):
        done = subprocess.run(
            [sys.executable, "-c", "import sys, gen_reference as g; "
             "sys.stdout.write(''.join(f() for f in g.PAGES.values()))"],
            cwd=REPO / "docs", env={"COLUMNS": columns, "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        pages[columns] = done.stdout
    assert pages["40"] == pages["300"] and pages["40"]


def test_every_command_flag_key_and_metric_is_listed() -> None:
    from typer.main import get_command

    from hops_cli.main import app
    from hopsd.config import _SECTIONS
    from hopsd.daemon.metrics import DaemonMetrics

    cli, config, metrics = (GEN.PAGES[p]() for p in ("cli.md", "config.md", "metrics.md"))
    root = get_command(app)
    ctx = root.context_class(root, info_name="hops")
    for name in root.list_commands(ctx):
        command = root.get_command(ctx, name)
        assert f"### hops {name}\n" in cli
        for sub in getattr(command, "list_commands", lambda _: [])(ctx):
            assert f"#### hops {name} {sub}\n" in cli
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{param.opts[0]}`" in cli, (name, param.opts)
    for flag in ("--check", "--shadow", "--no-standby", "--log-level", "--once", "--ticks"):
        assert f"`{flag}`" in cli
    for section, keys in _SECTIONS.items():
        assert f"## [{section}]\n" in config
        for key in keys:
            assert f"| `{key}` |" in config, (section, key)
    for family in DaemonMetrics().registry.collect():
        if family.name.startswith("hopsd_"):
            assert f"`{family.name}" in metrics, family.name


def test_check_mode_names_the_command_that_regenerates(tmp_path: Path) -> None:
    page = REPO / "docs" / "reference" / "metrics.md"
    before = page.read_text()
    try:
        page.write_text(before + "stale\n")
        done = subprocess.run(
            [sys.executable, str(REPO / "docs" / "gen_reference.py"), "--check"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        page.write_text(before)
    assert done.returncode == 1
    assert "docs/reference/metrics.md" in done.stderr and GEN.REGENERATE in done.stderr
