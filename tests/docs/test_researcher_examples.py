"""The researcher guide's own-cluster example runs as written and reads its files."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from hops_cli.main import app

REPO = Path(__file__).resolve().parents[2]


def test_the_guides_cluster_and_trace_simulate(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(REPO)
    guide = (REPO / "docs" / "researcher-guide.md").read_text()
    command = "hops simulate --cluster examples/sim/cluster.toml --trace examples/sim/trace.csv"
    assert command in guide
    trace = (REPO / "examples" / "sim" / "trace.csv").read_text()
    assert trace.strip() in guide  # the guide shows the file as it is
    args = [*command.split()[1:], "--policies", "hops,fifo", "--seed", "0", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["n_jobs"] == 4 and out["total_gpus"] == 16
    for policy in ("hops", "fifo"):  # the guide's table is this code's output
        row = re.search(rf"│ {policy} +│ +([0-9.]+) │ +([0-9.]+) │", guide)
        assert row, policy
        got = out["policies"][policy]
        assert (f"{got['makespan_h']:.2f}", f"{got['avg_jct_h']:.2f}") == row.groups(), (
            f"the table in docs/researcher-guide.md is out of date for {policy}: run its "
            "hops simulate command and paste the output"
        )


def test_the_guides_policy_plugin_is_the_tested_fixture() -> None:
    """"Writing a policy" shows pieces of tests/fixtures/policy_plugin, which
    tests/packaging/test_policy_plugin.py installs and runs: they must stay the same."""
    import tomllib

    guide = (REPO / "docs" / "researcher-guide.md").read_text()
    fixture = REPO / "tests" / "fixtures" / "policy_plugin"
    assert "tests/fixtures/policy_plugin/" in guide
    project = tomllib.loads((fixture / "pyproject.toml").read_text())["project"]
    for name, target in project["entry-points"]["hops.policies"].items():
        assert f'{name} = "{target}"' in guide
    module = (fixture / "shortest_first.py").read_text()
    for line in (
        "class ShortestFirstSettings:",
        'reverse: bool = field(default=False, metadata={"help": "largest remaining work first"})',
        'name = "shortest-first"',
        "def __init__(self, own: ShortestFirstSettings) -> None:",
    ):
        assert line in guide and line in module, line
