"""A policy plug-in installed beside hops is found, configured and followed, with no change
to hops: tests/fixtures/policy_plugin is its own distribution, declaring ``shortest-first``
in the entry-point group hops.policies.

Both are installed into a fresh virtual environment: hops from the wheel built
from this checkout (conftest.py), whose metadata declares the built-in policies,
and the plug-in from a copy of its folder. The third-party dependencies come from
this project's ``.venv`` through a ``.pth`` line, as in test_wheel.py, which keeps
the test offline. The policy is then chosen by name on the command line and set
up by its ``[policies.shortest-first]`` table.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging_dists import REPO, Dists, run

PLUGIN = REPO / "tests" / "fixtures" / "policy_plugin"

# One 4-GPU node; every job needs all of it, so jobs run one at a time and the order
# of their starts is the order the policy chose.
CLUSTER = """
[gpu_types.RTX3090]
speed = 1.0

[[node_groups]]
prefix = "n"
count = 1
gpu_type = "RTX3090"
gpus = 4
"""
# All submitted at once, sizes out of submission order.
TRACE = """job_id,submit_time_s,demands,total_samples,model
medium,0,4,200000,resnet18
large,0,4,400000,resnet18
small,0,4,100000,resnet18
"""


def _pip(python: Path, *args: str) -> None:
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "--disable-pip-version-check", *args], python.parent)  # fmt: skip


@pytest.fixture(scope="module")
def venv(dists: Dists, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """hops (the wheel) and the plug-in, each installed as a user would install them."""
    root = tmp_path_factory.mktemp("plugin") / "env"
    run([sys.executable, "-m", "venv", "--without-pip", str(root)], root.parent)
    python = root / "bin" / "python"
    _pip(python, str(dists.scheduler_wheel))
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
               root.parent, err=False).strip()  # fmt: skip
    (Path(site) / "hops-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    source = root.parent / "policy_plugin"
    shutil.copytree(PLUGIN, source)  # its build leaves build/ and egg-info in the copy only
    _pip(python, "--no-build-isolation", str(source))
    return root


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HOPS_CONF")}


def _starts(venv: Path, tmp_path: Path, table: str) -> tuple[list[str], dict[str, object]]:
    """Job ids in the order they first started under shortest-first with this table."""
    tmp_path.mkdir()
    (tmp_path / "cluster.toml").write_text(CLUSTER)
    (tmp_path / "trace.csv").write_text(TRACE)
    sim = tmp_path / "sim.toml"
    sim.write_text(f"profiling_s = 0\n[policies.shortest-first]\n{table}")
    out = tmp_path / "out"
    run([str(venv / "bin" / "hops"), "simulate", "--cluster", str(tmp_path / "cluster.toml"),
         "--trace", str(tmp_path / "trace.csv"), "--policies", "shortest-first",
         "--sim-config", str(sim), "--out", str(out), "--json"], tmp_path, _env())  # fmt: skip
    jobs = json.loads((out / "jobs_shortest-first.json").read_text())
    starts = sorted((job["first_start_s"], job["job_id"]) for job in jobs)
    assert len({t for t, _ in starts}) == len(starts), starts  # one at a time
    results = json.loads((out / "results.json").read_text())
    return [job_id for _, job_id in starts], results["policy_settings"]["shortest-first"]


def test_hops_simulate_follows_the_plugin_and_its_setting(venv: Path, tmp_path: Path) -> None:
    where = run([str(venv / "bin" / "python"), "-c",
                 "import hopsd, shortest_first; print(hopsd.__file__, shortest_first.__file__)"],
                tmp_path, _env(), err=False).split()  # fmt: skip
    assert all(path.startswith(str(venv)) for path in where), where
    order, recorded = _starts(venv, tmp_path / "default", "")
    assert order == ["small", "medium", "large"] and recorded == {"reverse": False}
    order, recorded = _starts(venv, tmp_path / "reversed", "reverse = true\n")
    assert order == ["large", "medium", "small"] and recorded == {"reverse": True}


def test_hopsd_checks_the_plugin_s_table_before_anything_else(venv: Path, tmp_path: Path) -> None:
    conf = tmp_path / "hops.conf"
    head = (f'[ledger]\nurl = "sqlite:///{tmp_path / "ledger.sqlite"}"\n[metrics]\naddress = ""\n'
            '[scheduler]\npolicy = "shortest-first"\n[policies.shortest-first]\n')  # fmt: skip

    def hopsd(table: str) -> subprocess.CompletedProcess[str]:
        conf.write_text(head + table)
        return subprocess.run([str(venv / "bin" / "hopsd"), "--once", "--config", str(conf)],
                              cwd=tmp_path, env=_env(), capture_output=True, text=True,
                              timeout=120)  # fmt: skip

    bad = hopsd('reverse = "yes"\n')
    assert bad.returncode == 2, bad.stderr  # hopsd's exit code for a bad configuration
    assert "policies.shortest-first.reverse: expected bool, got str 'yes'" in bad.stderr
    assert "Traceback" not in bad.stderr
    good = hopsd("reverse = true\n")
    assert good.returncode == 3, good.stderr  # past the configuration: the ledger is unmigrated
    assert "hops db upgrade" in good.stderr


@pytest.mark.slurm
@pytest.mark.skipif(not os.environ.get("SLURM_CONF"), reason="SLURM_CONF unset: no test cluster")
def test_live_hopsd_starts_jobs_in_the_plugin_s_order(
    venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hopsd of the fresh install, on the test cluster's 2-GPU k80 node only: three 2-GPU
    jobs run one at a time, largest remaining work first as ``reverse = true`` asks
    (submission order and the plug-in's default order are both different)."""
    monkeypatch.syspath_prepend(str(REPO / "tests" / "daemon"))
    from daemon_live import LiveEnv, drive
    from faulty_hopsd import LAUNCHER

    env = LiveEnv.create(tmp_path)
    try:
        text = env.config_path.read_text()
        text = text.replace("[scheduler]\n", '[scheduler]\npolicy = "shortest-first"\n', 1)
        text = re.sub(r"(?m)^partitions = .*$", 'partitions = ["k80"]', text)
        env.config_path.write_text(text + "[policies.shortest-first]\nreverse = true\n")
        samples = {"medium": 1200.0, "short": 600.0, "long": 1800.0}  # submitted in this order
        ids = {label: env.submit((2,), n, label=label) for label, n in samples.items()}
        line = [str(venv / "bin" / "python"), str(LAUNCHER), "--adopt-prefix", env.prefix,
                "--config", str(env.config_path)]  # fmt: skip
        with open(tmp_path / "hopsd.log", "ab") as log:
            hopsd = subprocess.Popen(line, stdout=log, stderr=log, env=_env())
        try:
            finished = drive(lambda: None, env.all_terminal, deadline_s=600, interval_s=2.0)
        finally:
            hopsd.terminate()
            hopsd.wait(timeout=60)
        assert finished, (tmp_path / "hopsd.log").read_text()[-3000:]
        rows = env.rows()
        started = sorted(samples, key=lambda label: rows[ids[label]].first_start_time or 0.0)
        assert started == ["long", "medium", "short"]
    finally:
        env.cleanup()
