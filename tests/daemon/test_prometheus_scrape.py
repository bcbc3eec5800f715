"""A real Prometheus (Debian's package) scrapes a running hopsd service and loads its rules.

The service ticks against the in-memory Slurm and serves its endpoint on a free
port; Prometheus scrapes it every second with contrib/prometheus/hopsd.rules.yml
loaded. The test reads the series back through Prometheus' query API.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from hopsd.daemon.service import Service
from hopsd.daemon.tick import Tick
from hopsd.slurm.tag import HopsTag

RULES = Path(__file__).resolve().parents[2] / "contrib" / "prometheus" / "hopsd.rules.yml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    return json.loads(urllib.request.urlopen(url, timeout=5).read())


def _query(base: str, expr: str) -> list[dict[str, Any]]:
    body = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def _rules(base: str) -> list[dict[str, Any]]:
    return [r for g in _get(f"{base}/api/v1/rules")["data"]["groups"] for r in g["rules"]]


def _prometheus(tmp: Path, target: str, port: int) -> subprocess.Popen[bytes]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus missing: scripts/install.sh installs Debian's prometheus package"
    config = tmp / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{json.dumps(str(RULES))}]\n"
        "scrape_configs:\n"
        f"  - job_name: hopsd\n    static_configs: [{{targets: [{json.dumps(target)}]}}]\n"
    )
    return subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=(tmp / "prometheus.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip


def _until(check: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = check()
        except OSError:
            got = None
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def test_a_real_prometheus_scrapes_hopsd_and_loads_the_rules(
    config, port, sessions, clock, tmp_path
) -> None:
    port.add_job(HopsTag((2,), 1e7))
    service = Service(Tick(config, port, sessions, clock=clock))
    service.run_once()
    service.metrics.serve("127.0.0.1:0", service.health_checks())
    endpoint = service.metrics.endpoint
    assert endpoint is not None
    web = _free_port()
    base = f"http://127.0.0.1:{web}"
    proc = _prometheus(tmp_path, f"127.0.0.1:{endpoint.port}", web)
    try:
        leader = _until(lambda: _query(base, 'hopsd_leader{job="hopsd"}'), 60)
        assert leader, (tmp_path / "prometheus.log").read_text()[-2000:]
        assert leader[0]["value"][1] == "1"
        assert _query(base, 'up{job="hopsd"}')[0]["value"][1] == "1"
        totals = {r["metric"]["gpu_type"]: r["value"][1] for r in _query(base, "hopsd_gpus_total")}
        assert totals == {"a100": "8", "k80": "8"}
        started = _query(base, 'hopsd_enactments_total{kind="start",result="ok"}')
        assert [r["value"][1] for r in started] == ["1"]
        assert _query(base, '{__name__=~"hopsd_.*_created"}') == []
        rules = _until(lambda: [r for r in _rules(base) if r.get("health") == "ok"], 30)
        assert len(rules or []) == 7, _rules(base)
        assert {r["name"] for r in _rules(base) if r["state"] == "firing"} == set()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        endpoint.close()
