"""The site builds in MkDocs's strict mode, and strict mode does fail on a broken
link or anchor (scripts/test.sh builds it the same way)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("mkdocs", reason="the docs extra (pip install '.[docs]') is not installed")


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = _build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()
    for page in (tmp_path / "site").rglob("*.html"):  # the site loads nothing from elsewhere
        html = page.read_text()
        assert not re.search(r'src="https?:|<link[^>]*href="https?:', html), page


@pytest.mark.parametrize(
    "link", ["[gone](no-such-page.md)", "[gone](commands.md#no-such-anchor)", "[gone](#nowhere)"]
)
def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path, link: str) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(REPO / "mkdocs.yml", copy)
    shutil.copytree(REPO / "docs", copy / "docs")
    page = copy / "docs" / "user-guide.md"
    page.write_text(page.read_text() + f"\n{link}\n")
    done = _build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert "gone" in done.stderr or link.split("(")[1].rstrip(")") in done.stderr, done.stderr
