"""The wheel carries what an installed hops needs: migrations, presets, both commands.

The wheel is built from a copy of this checkout (``python -m build``, see
conftest.py) and installed without its dependencies into a fresh virtual environment that
has no access to the checkout; the third-party dependencies (numpy, SQLAlchemy,
...) come from this project's ``.venv`` through a ``.pth`` line, which keeps the
test fast and offline. Everything of hops itself (code and data files) comes
from the wheel, which the test checks before using it: a wheel missing its
Alembic scripts or presets fails ``hops db upgrade`` / ``hops simulate``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from packaging_dists import Dists
from packaging_dists import run as _run

from hopsd.ledger import migrate


@pytest.fixture(scope="module")
def wheel(dists: Dists) -> Path:
    return dists.scheduler_wheel


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)], root.parent)
    log = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(root / "bin" / "python"),
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(wheel),
        ],
        root.parent,
    )
    assert "warning" not in log.lower().replace("warning: location", ""), log
    site = _run(
        [
            str(root / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        root.parent,
    ).strip()
    (Path(site) / "hops-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return root


def test_wheel_lists_migrations_and_presets(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "hopsd/ledger/migrations/env.py" in names
    assert "hopsd/ledger/migrations/script.py.mako" in names
    assert "hopsd/ledger/migrations/versions/0001_initial.py" in names
    assert "hopsd/sim/presets/paper-64.toml" in names
    assert "hopsd/sim/presets/models.toml" in names


def test_installed_wheel_migrates_and_simulates(venv: Path, tmp_path: Path) -> None:
    bin_dir = venv / "bin"
    where = _run(
        [
            str(bin_dir / "python"),
            "-c",
            "import hopsd, hops_cli; from hopsd.ledger import migrate; "
            "print(hopsd.__file__); print(hops_cli.__file__); print(migrate.SQL_DIR)",
        ],
        tmp_path,
    )
    for line in where.split():
        assert line.startswith(str(venv)), f"{line} is not from the installed wheel"
    ledger = tmp_path / "ledger.sqlite"
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "sqlite:///{ledger}"\n[metrics]\naddress = ""\n')
    env = {**os.environ, "HOPS_CONF": str(conf)}
    env.pop("PYTHONPATH", None)

    # the installed daemon refuses an unmigrated ledger, naming the command (exit 3)
    refused = subprocess.run(
        [str(bin_dir / "hopsd"), "--once"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 3, refused.stderr
    assert "hops db upgrade" in refused.stderr
    head = migrate.head_revision()
    assert ": empty (needs" in _run([str(bin_dir / "hops"), "db", "current"], tmp_path, env)
    _run([str(bin_dir / "hops"), "db", "upgrade"], tmp_path, env)
    assert f": {head} (needs {head})" in _run(
        [str(bin_dir / "hops"), "db", "current"], tmp_path, env
    )
    assert ledger.stat().st_size > 0

    out = _run(
        [str(bin_dir / "hops"), "simulate", "--preset", "paper-64", "--policies", "hops", "--json"],
        tmp_path,
        env,
        err=False,
    )
    result = json.loads(out)
    assert result["n_jobs"] == 25
    assert result["policies"]["hops"]["avg_jct_h"] > 0
