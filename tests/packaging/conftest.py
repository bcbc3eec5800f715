"""The distributions of hops, built once per test run (see packaging_dists.py)."""

from __future__ import annotations

import shutil

import pytest
from packaging_dists import GIT, REPO, SKIP, TAG_VERSION, Dists, build, run


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    src = tmp_path_factory.mktemp("src") / "hops"
    shutil.copytree(REPO, src, ignore=SKIP)
    run([*GIT, "init", "-q"], src)
    run([*GIT, "add", "-A"], src)
    run([*GIT, "commit", "-q", "--allow-empty", "--no-verify", "-m", "build"], src)
    run([*GIT, "tag", f"v{TAG_VERSION}"], src)
    out = tmp_path_factory.mktemp("dist")
    build(src, out)
    build(src / "probe", out)
    (wheel,) = out.glob("hops_scheduler-*.whl")
    (sdist,) = out.glob("hops_scheduler-*.tar.gz")
    (probe_wheel,) = out.glob("hops_probe-*.whl")
    (probe_sdist,) = out.glob("hops_probe-*.tar.gz")
    return Dists(wheel, sdist, probe_wheel, probe_sdist, src)
