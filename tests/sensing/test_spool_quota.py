"""A job's report or progress file past its quota is emptied, its owner told, and the job's
later records are read again; a file with a name outside the spool is not emptied, but the
spool's names of it go."""

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


def test_a_report_with_a_name_outside_the_spool_is_not_emptied_but_leaves_the_spool(
    tmp_path: Path,
) -> None:
    """A hard link could name a file of the user's elsewhere: hopsd never empties it, but the
    spool's name goes, so the job can no longer grow the spool through it."""
    problems = InputProblems()
    spool, elsewhere = tmp_path / "spool" / "alice", tmp_path / "elsewhere"
    spool.mkdir(parents=True)
    elsewhere.mkdir()
    flood(elsewhere / "precious", sensing.MAX_FILE_BYTES)
    os.link(elsewhere / "precious", spool / "7.jsonl")
    assert reader(problems).read(spool, 7, "alice", per_user=True) == []
    assert (elsewhere / "precious").stat().st_size > sensing.MAX_FILE_BYTES
    assert (elsewhere / "precious").stat().st_nlink == 1
    assert not (spool / "7.jsonl").exists()
    said = problems.take(7) or ""
    assert "quota" in said and "1 other name" in said


def test_a_report_whose_names_are_all_in_the_users_spool_directory_is_freed(
    tmp_path: Path,
) -> None:
    """Every name in a user's spool directory is hopsd's to answer for: with them all gone
    the file has no name, so it is emptied even while the job still holds and writes it."""
    problems = InputProblems()
    r = reader(problems)
    path = tmp_path / "7.jsonl"
    flood(path, sensing.MAX_FILE_BYTES)
    os.link(path, tmp_path / "hidden-copy")
    with path.open("ab") as writer:
        assert r.read(tmp_path, 7, "alice", per_user=True) == []
        assert sorted(p.name for p in tmp_path.iterdir()) == []
        held = os.fstat(writer.fileno())
        assert (held.st_nlink, held.st_size, held.st_blocks) == (0, 0, 0)
    assert "hidden-copy" in (problems.take(7) or "")
    path.write_bytes(json.dumps(run_record()).encode() + b"\n")  # the probe starts afresh
    assert len(r.read(tmp_path, 7, "alice", per_user=True)) == 1


def test_in_a_working_directory_only_job_files_are_names_hopsd_removes(tmp_path: Path) -> None:
    """The working directory is the user's: a second name that is another job's file goes
    with the report, a name of the user's own (``notes``) keeps the data."""
    flood(tmp_path / "7.jsonl", sensing.MAX_FILE_BYTES)
    os.link(tmp_path / "7.jsonl", tmp_path / "8.jsonl")
    flood(tmp_path / "9.jsonl", sensing.MAX_FILE_BYTES)
    os.link(tmp_path / "9.jsonl", tmp_path / "notes")
    r = reader(InputProblems())
    with (tmp_path / "7.jsonl").open("ab") as writer:
        assert r.read(tmp_path, 7, "alice") == []
        assert os.fstat(writer.fileno()).st_size == 0
    assert r.read(tmp_path, 9, "alice") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]
    assert (tmp_path / "notes").stat().st_size > sensing.MAX_FILE_BYTES


def running(spool: Path, problems: InputProblems) -> Sensing:
    """Sensing over the shared spool ``spool`` with alice's job 7 running."""
    s = Sensing(spool, uid_of=lambda user: ME, problems=problems)
    s.spools.note([ObservedJob(7, "alice", "a", "RUNNING", tag=HopsTag((1,), 1e6))])
    return s


def test_a_progress_file_past_its_quota_is_emptied(tmp_path: Path) -> None:
    problems = InputProblems()
    s = running(tmp_path, problems)
    path = tmp_path / "alice" / "7.progress.json"
    flood(path, sensing.MAX_PROGRESS_BYTES * 100)
    assert s.read_progress(7, "alice") is None
    assert path.stat().st_size == 0 and "emptied" in (problems.take(7) or "")


def test_a_progress_file_with_a_second_name_in_the_spool_is_freed_with_it(tmp_path: Path) -> None:
    problems = InputProblems()
    s = running(tmp_path, problems)
    path = tmp_path / "alice" / "7.progress.json"
    flood(path, sensing.MAX_PROGRESS_BYTES * 100)
    os.link(path, tmp_path / "alice" / "7.jsonl")  # a second name of hopsd's: the report's
    with path.open("ab") as writer:
        assert s.read_progress(7, "alice") is None
        assert os.fstat(writer.fileno()).st_size == 0
    assert list((tmp_path / "alice").iterdir()) == []
    assert "quota" in (problems.take(7) or "")
