"""Report validation: only well-formed records of the job's own user and id are believed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hopsd.daemon import sensing
from hopsd.daemon.job_reports import ProfileReport, RunReport
from hopsd.daemon.sensing import ReportReader

ME = os.getuid()


def run_record(job: object = "7", **over: object) -> dict[str, object]:
    rec: dict[str, object] = {
        "v": 1,
        "job": job,
        "kind": "run",
        "run": 0,
        "node": "v100n1",
        "at": 1.7e9,
        "iterations": 10,
        "samples": 320,
        "seconds": 2.0,
        "t_d": [0.01] * 10,
        "t_w": [0.0] * 10,
    }
    rec.update(over)
    return rec


def write(path: Path, *lines: object) -> None:
    with path.open("a") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def reader() -> ReportReader:
    return ReportReader(uid_of=lambda user: ME if user == "alice" else None)


def test_a_good_run_record_is_read_once(tmp_path: Path) -> None:
    write(tmp_path / "7.jsonl", run_record())
    r = reader()
    (rep,) = r.read(tmp_path, 7, "alice")
    assert isinstance(rep, RunReport) and rep.samples == 320 and rep.seconds == 2.0
    assert r.read(tmp_path, 7, "alice") == []
    write(tmp_path / "7.jsonl", run_record(samples=64))
    assert [x.samples for x in r.read(tmp_path, 7, "alice")] == [64]


def test_a_profile_record_is_parsed_with_its_means(tmp_path: Path) -> None:
    rec = run_record(kind="profile", t_iter=0.1, t_f=0.02, t_b=0.05, t_u=0.01, t_d_wait=0.02)
    rec.update(samples_per_iter=32, iterations=20, t_d=[0.01, 0.03], t_w=[0.0, 0.0])
    write(tmp_path / "7.jsonl", rec)
    (rep,) = reader().read(tmp_path, 7, "alice")
    assert isinstance(rep, ProfileReport)
    assert rep.means.t_d == pytest.approx(0.02) and rep.means.t_iter == 0.1


def test_a_file_of_another_owner_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "7.jsonl"
    write(path, run_record())
    os.chown(path, 12345, -1)
    assert reader().read(tmp_path, 7, "alice") == []
    assert reader().read(tmp_path, 7, "mallory") == []  # unknown user: cannot check


def test_records_claiming_another_job_are_ignored(tmp_path: Path) -> None:
    write(tmp_path / "7.jsonl", run_record(job="8"), run_record(job=7))
    reps = reader().read(tmp_path, 7, "alice")
    assert len(reps) == 1  # the numeric id 7 matches the file, job "8" does not


def test_links_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    write(target, run_record())
    (tmp_path / "7.jsonl").symlink_to(target)
    assert reader().read(tmp_path, 7, "alice") == []


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2, 3]",
        json.dumps(run_record(v=2)),
        json.dumps(run_record(kind="weird")),
        json.dumps(run_record(samples=-1)),
        json.dumps(run_record(seconds=True)),
        json.dumps(run_record(iterations=1.5)),
        json.dumps(run_record(node="")),
        json.dumps(run_record(t_d=[0.1] * 5000)),
        json.dumps(run_record(t_d=["x"])),
        json.dumps(run_record(seconds=1e9)),
        '{"v":1,"job":"7","kind":"run","run":0,"node":"n","at":1,"iterations":1,'
        '"samples":NaN,"seconds":1}',
        json.dumps(run_record(kind="profile", iterations=0, t_iter=0.1)),
    ],
)
def test_garbage_lines_are_skipped_and_good_ones_kept(tmp_path: Path, line: str) -> None:
    write(tmp_path / "7.jsonl", line, run_record())
    assert len(reader().read(tmp_path, 7, "alice")) == 1


def test_oversized_lines_are_skipped(tmp_path: Path) -> None:
    big = run_record(pad="x" * (sensing.MAX_LINE_BYTES + 10))
    write(tmp_path / "7.jsonl", big, run_record())
    assert len(reader().read(tmp_path, 7, "alice")) == 1


def test_an_oversized_file_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "7.jsonl"
    write(path, run_record())
    with path.open("r+b") as f:
        f.truncate(sensing.MAX_FILE_BYTES + 1)
    assert reader().read(tmp_path, 7, "alice") == []


def test_a_partial_last_line_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "7.jsonl"
    text = json.dumps(run_record())
    path.write_text(text[:40])
    r = reader()
    assert r.read(tmp_path, 7, "alice") == []
    with path.open("a") as f:
        f.write(text[40:] + "\n")
    assert len(r.read(tmp_path, 7, "alice")) == 1


def test_a_file_started_afresh_is_read_from_the_top(tmp_path: Path) -> None:
    path = tmp_path / "7.jsonl"
    write(path, run_record(), run_record())
    r = reader()
    assert len(r.read(tmp_path, 7, "alice")) == 2
    path.write_text(json.dumps(run_record(samples=1)) + "\n")
    assert [x.samples for x in r.read(tmp_path, 7, "alice")] == [1]
