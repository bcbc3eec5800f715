"""The slim install a login node gets, and the probe on its own in a training environment.

Each venv here is fresh and installs from the built wheels only (the
dependencies from the package index at constraints/ci.txt's versions): what
``pip install hops-scheduler`` and ``pip install hops-probe`` give a user.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging_dists import REPO, TAG_VERSION, Dists, make_venv, pip_install, run

#: What only the extras bring: the simulator's baselines and plots, the REST
#: backend, PostgreSQL. A login node's install has none of them.
EXTRAS_ONLY = ("scipy", "matplotlib", "httpx", "psycopg", "pydantic")
#: A Python 3.8 to run the probe on, where this machine has one (Debian's or pyenv's).
PYTHON_38 = sorted(
    str(p)
    for pattern in ("/usr/bin/python3.8", "/root/.pyenv/versions/3.8*/bin/python3.8")
    for p in Path("/").glob(pattern.lstrip("/"))
    if os.access(p, os.X_OK)
)[:1]


@pytest.fixture(scope="module")
def slim(dists: Dists, tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = make_venv(tmp_path_factory.mktemp("slim") / "env")
    pip_install(python, "--find-links", str(dists.folder), str(dists.scheduler_wheel))
    return python


def _installed(python: Path) -> set[str]:
    listed = run([str(python), "-m", "pip", "list", "--format=json"], python.parent, err=False)
    return {row["name"].lower() for row in json.loads(listed)}


def _env(conf: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HOPS_CONF"] = str(conf)
    return env


def _ledger_conf(tmp_path: Path) -> Path:
    conf = tmp_path / "hops.conf"
    conf.write_text(
        f'[ledger]\nurl = "sqlite:///{tmp_path / "ledger.sqlite"}"\n[metrics]\naddress = ""\n'
    )
    return conf


def test_both_distributions_carry_the_tag_version_and_only_their_own_modules(
    dists: Dists,
) -> None:
    assert dists.scheduler_wheel.name.startswith(f"hops_scheduler-{TAG_VERSION}-")
    assert dists.probe_wheel.name.startswith(f"hops_probe-{TAG_VERSION}-")
    tops = {n.split("/")[0] for n in zipfile.ZipFile(dists.scheduler_wheel).namelist()}
    assert {"hopsd", "hops_cli", "hops_submitit"} <= tops
    assert "hops_probe" not in tops  # the probe is its own distribution
    probe = {n.split("/")[0] for n in zipfile.ZipFile(dists.probe_wheel).namelist()}
    assert {t for t in probe if not t.endswith(".dist-info")} == {"hops_probe"}
    meta = zipfile.ZipFile(dists.probe_wheel).read(
        f"hops_probe-{TAG_VERSION}.dist-info/METADATA"
    ).decode()
    assert "Requires-Python: >=3.8" in meta
    assert not re.search(r"^Requires-Dist:", meta, re.M)  # standard library only


def test_the_sdists_rebuild_into_the_same_wheels(dists: Dists, tmp_path: Path) -> None:
    for sdist, wheel in (
        (dists.scheduler_sdist, dists.scheduler_wheel),
        (dists.probe_sdist, dists.probe_wheel),
    ):
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp_path)  # the archive built above
        (root,) = [p for p in tmp_path.iterdir() if sdist.name.startswith(p.name)]
        out = tmp_path / f"out-{root.name}"
        run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
             str(root)], tmp_path)  # fmt: skip
        (rebuilt,) = out.glob("*.whl")
        assert rebuilt.name == wheel.name  # the version survives without git
        names = set(zipfile.ZipFile(rebuilt).namelist())
        assert names == set(zipfile.ZipFile(wheel).namelist())


def test_the_slim_install_has_no_extra_and_runs_the_cli(slim: Path, tmp_path: Path) -> None:
    installed = _installed(slim)
    assert {"hops-scheduler", "hops-probe", "highspy", "sqlalchemy"} <= installed
    assert not installed & set(EXTRAS_ONLY), installed & set(EXTRAS_ONLY)

    bin_dir = slim.parent
    env = _env(_ledger_conf(tmp_path))
    assert run([str(bin_dir / "hops"), "--version"], tmp_path, env) == f"hops {TAG_VERSION}\n"
    run([str(bin_dir / "hops"), "db", "upgrade"], tmp_path, env)
    status = run([str(bin_dir / "hops"), "status", "--json"], tmp_path, env, err=False)
    assert json.loads(status)["jobs"] == []
    hopsd = run([str(bin_dir / "hopsd"), "--version"], tmp_path, env)
    assert hopsd.strip() == f"hopsd {TAG_VERSION}"
    # hops's own planner runs without SciPy
    out = run([str(bin_dir / "hops"), "simulate", "--preset", "paper-64", "--policies", "hops",
               "--json"], tmp_path, env, err=False)  # fmt: skip
    assert json.loads(out)["policies"]["hops"]["avg_jct_h"] > 0


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["simulate", "--preset", "paper-64", "--policies", "hops,sia"], "sim"),
        (["simulate", "--preset", "paper-64", "--policies", "hops", "--out", "o"], "sim"),
        (["simulate", "--preset", "paper-64", "--policies", "hops", "--seeds", "0-1"], "sim"),
    ],
    ids=["sia-baseline", "plots", "seed-intervals"],
)
def test_what_needs_an_extra_says_which_in_one_line(
    slim: Path, tmp_path: Path, argv: list[str], extra: str
) -> None:
    env = _env(_ledger_conf(tmp_path))
    done = subprocess.run([str(slim.parent / "hops"), *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode != 0
    assert f"pip install 'hops-scheduler[{extra}]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "o").exists()  # refused before any work


def test_hopsd_with_a_baseline_policy_without_the_extra_is_a_config_error(
    slim: Path, tmp_path: Path
) -> None:
    conf = _ledger_conf(tmp_path)
    conf.write_text(conf.read_text() + '[scheduler]\npolicy = "sia"\n')
    done = subprocess.run([str(slim.parent / "hopsd"), "--once", "--config", str(conf)],
                          cwd=tmp_path, env=_env(conf), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr  # hopsd's exit code for a bad configuration
    assert "scheduler.policy: the sia policy needs scipy" in done.stderr, done.stderr
    assert "pip install 'hops-scheduler[sim]'" in done.stderr and "Traceback" not in done.stderr


def test_a_postgresql_ledger_without_the_extra_is_one_line(slim: Path, tmp_path: Path) -> None:
    conf = tmp_path / "hops.conf"
    conf.write_text('[ledger]\nurl = "postgresql+psycopg://nobody@127.0.0.1/none"\n')
    done = subprocess.run([str(slim.parent / "hops"), "db", "current"], cwd=tmp_path,
                          env=_env(conf), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "pip install 'hops-scheduler[postgres]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.slurm
def test_hopsd_check_of_the_slim_install_reaches_the_test_cluster(
    slim: Path, tmp_path: Path
) -> None:
    cluster = Path(os.environ.get("HOPS_CONF", ""))
    if not cluster.is_file():
        pytest.skip("the test cluster's hops.conf (HOPS_CONF) is not there")
    text = cluster.read_text()
    text = re.sub(r'(?m)^url = ".*"$', f'url = "sqlite:///{tmp_path / "ledger.sqlite"}"', text)
    text = re.sub(r'(?m)^spool_dir = ".*"$', f'spool_dir = "{tmp_path / "spool"}"', text)
    conf = tmp_path / "hops.conf"
    conf.write_text(text)
    env = _env(conf)
    run([str(slim.parent / "hops"), "db", "upgrade"], tmp_path, env)
    out = run([str(slim.parent / "hopsd"), "--check", "--json", "--config", str(conf)], tmp_path,
              env, err=False)  # fmt: skip
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["slurm"]["ok"], checks["slurm"]
    assert checks["ledger"]["ok"], checks["ledger"]
    assert all(c["ok"] for c in checks.values()), checks


PROBED = """
import json, os, sys
from hops_probe import Probe

probe = Probe()
done = 0
for _ in range(40):
    with probe.iteration(samples=8) as it:
        with it.phase("forward"):
            sum(range(2000))
    done += 8
    probe.progress(done)
probe.close()
print(probe.path)
"""


@pytest.mark.parametrize(
    "python", [sys.executable, *PYTHON_38], ids=["this-python", *("python3.8" for _ in PYTHON_38)]
)
def test_the_probe_alone_instruments_a_script(dists: Dists, tmp_path: Path, python: str) -> None:
    venv = make_venv(tmp_path / "env", python)
    run([str(venv), "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
         str(dists.probe_wheel)], tmp_path)  # fmt: skip
    assert _installed(venv) & {"hops-probe", "hops-scheduler"} == {"hops-probe"}
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    env = {"PATH": os.environ["PATH"], "HOPS_SPOOL_DIR": str(spool), "HOPS_JOB_ID": "41",
           "HOPS_PROBE_FLUSH_S": "0"}  # fmt: skip
    report = Path(run([str(venv), "-c", PROBED], tmp_path, env, err=False).strip())
    assert report == spool / "41.jsonl"
    records = [json.loads(line) for line in report.read_text().splitlines()]
    runs = [r for r in records if r.get("kind") == "run"]
    assert runs and max(r.get("samples_done", 0) for r in runs) == 320
    if python in PYTHON_38:
        version = run([str(venv), "-c", "import sys; print(sys.version_info[:2])"], tmp_path)
        assert version.strip() == "(3, 8)"
        # the PyTorch and torchrun helpers import torch when used; the Lightning
        # callback subclasses Lightning's, so it is only compiled here
        for helper in ("pytorch", "torchrun"):
            run([str(venv), "-c", f"import hops_probe.{helper}"], tmp_path, env)
        run([str(venv), "-c", "import compileall, hops_probe, os, sys; sys.exit(not "
             "compileall.compile_dir(os.path.dirname(hops_probe.__file__), quiet=1))"],
            tmp_path, env)  # fmt: skip


def test_the_probe_keeps_to_python_3_8() -> None:
    """vermin reads the probe's source for anything newer than 3.8 (syntax, modules, calls)."""
    vermin = Path(sys.executable).parent / "vermin"
    done = subprocess.run([str(vermin), "--no-tips", "--violations", "-t=3.8-",
                           str(REPO / "probe" / "hops_probe")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
