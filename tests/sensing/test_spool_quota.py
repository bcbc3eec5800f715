"""A job's report or progress file past its quota is emptied, its owner told, and the job's
later records are read again; a file hopsd may not empty is left alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hopsd.daemon import sensing
from hopsd.daemon.problems import InputProblems
from hopsd.daemon.sensing import ReportReader, Sensing
from hopsd.daemon.views import ObservedJob
from hopsd.slurm.tag import HopsTag

ME = os.getuid()


def run_record() -> dict[str, object]:
    return {
        "v": 1, "job": "7", "kind": "run", "run": 0, "node": "v100n1", "at": 1.7e9,
        "iterations": 10, "samples": 320, "seconds": 2.0, "t_d": [0.01] * 10, "t_w": [0.0] * 10,
    }  # fmt: skip


def reader(problems: InputProblems) -> ReportReader:
    return ReportReader(uid_of=lambda user: ME if user == "alice" else None, problems=problems)


def flood(path: Path, size: int) -> None:
    with path.open("ab") as f:
        f.write(b"x" * size + b"\n")


def test_a_report_past_its_quota_is_emptied_and_the_owner_told(tmp_path: Path) -> None:
    problems = InputProblems()
    r = reader(problems)
    path = tmp_path / "7.jsonl"
    flood(path, sensing.MAX_FILE_BYTES)
    with path.open("ab") as writer:  # the job keeps its descriptor, appending
        assert r.read(tmp_path, 7, "alice") == []
        assert path.stat().st_size == 0 and path.stat().st_blocks == 0
        said = problems.take(7) or ""
        assert "emptied" in said and "quota" in said
        writer.write(json.dumps(run_record()).encode() + b"\n")
        writer.flush()
    assert len(r.read(tmp_path, 7, "alice")) == 1  # the job carries on being read


def test_a_report_within_its_quota_is_kept(tmp_path: Path) -> None:
    problems = InputProblems()
    path = tmp_path / "7.jsonl"
    flood(path, sensing.MAX_FILE_BYTES - 1000)
    reader(problems).read(tmp_path, 7, "alice")
    assert path.stat().st_size > sensing.MAX_FILE_BYTES - 1000


def test_a_report_with_a_second_name_is_not_emptied(tmp_path: Path) -> None:
    """A hard link could name a file of the user's elsewhere: hopsd empties no such file."""
    problems = InputProblems()
    path = tmp_path / "7.jsonl"
    flood(path, sensing.MAX_FILE_BYTES)
    os.link(path, tmp_path / "precious")
    assert reader(problems).read(tmp_path, 7, "alice") == []
    assert (tmp_path / "precious").stat().st_size > sensing.MAX_FILE_BYTES
    assert "quota" in (problems.take(7) or "")


def test_a_progress_file_past_its_quota_is_emptied(tmp_path: Path) -> None:
    problems = InputProblems()
    s = Sensing(tmp_path, uid_of=lambda user: ME, problems=problems)
    s.spools.note([ObservedJob(7, "alice", "a", "RUNNING", tag=HopsTag((1,), 1e6))])
    path = tmp_path / "alice" / "7.progress.json"
    flood(path, sensing.MAX_PROGRESS_BYTES * 100)
    assert s.read_progress(7, "alice") is None
    assert path.stat().st_size == 0 and "emptied" in (problems.take(7) or "")
