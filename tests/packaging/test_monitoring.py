"""contrib/prometheus and contrib/grafana: valid, unit-tested, and about series hopsd exports.

promtool (Debian's prometheus package, installed by scripts/install.sh) checks
the rules, runs their unit tests, and parses every dashboard query (turned into
recording rules). tests/daemon/test_prometheus_scrape.py runs a real Prometheus
against a running hopsd.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from prometheus_client.metrics_core import Metric

from hopsd.daemon.metrics import DaemonMetrics

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "contrib" / "prometheus" / "hopsd.rules.yml"
RULE_TESTS = REPO / "contrib" / "prometheus" / "hopsd.rules.test.yml"
DASHBOARD = REPO / "contrib" / "grafana" / "hopsd.json"
NAME = re.compile(r"\b((?:hopsd|process|python)_[a-z0-9_]+)\b")


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool missing: scripts/install.sh installs Debian's prometheus package"
    return found


def _exported() -> set[str]:
    """Every sample name hopsd's registry can expose (labelled families included)."""
    names: set[str] = set()
    for family in DaemonMetrics().registry.collect():
        names.add(family.name)
        names.update(_suffixed(family))
    return names


def _suffixed(family: Metric) -> set[str]:
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_sum", "_count"),
        "info": ("_info",),
    }.get(family.type, ())
    return {family.name + s for s in suffixes}


def _dashboard_exprs() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def test_promtool_checks_the_rules_and_runs_their_unit_tests() -> None:
    check = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 7 rules found" in check.stdout
    tested = subprocess.run(
        [_promtool(), "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_rules_and_dashboard_name_only_series_hopsd_exports() -> None:
    exported = _exported()
    used = set(NAME.findall(RULES.read_text()))
    for expr in _dashboard_exprs():
        used.update(NAME.findall(expr))
    assert used, "no series found in the rules or the dashboard"
    assert used - exported == set()


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    exprs = _dashboard_exprs()
    assert len(exprs) >= 15
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for i, expr in enumerate(exprs):
        concrete = expr.replace("$__rate_interval", "5m").replace("$instance", ".*")
        lines += [f"      - record: dashboard:query_{i}", f"        expr: {json.dumps(concrete)}"]
    path = tmp_path / "dashboard.rules.yml"
    path.write_text("\n".join(lines) + "\n")
    check = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
