"""Reading slurmstepd's requeue line from a job's output: only the owner's regular file."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from hopsd.daemon.job_output import TAIL_BYTES, stopped_by_requeue
from hopsd.slurm.parse_squeue import parse_jobs

pytestmark = pytest.mark.usefixtures("utc")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
# what slurmstepd wrote into a test-cluster job's output when hops's requeue stopped it
LINE = "slurmstepd-a100n2: error: *** JOB {job} ON a100n2 CANCELLED AT {at} DUE TO JOB REQUEUE ***"


def job_with_output(path: Path, job_id: int = 233):  # type: ignore[no-untyped-def]
    text = (FIXTURE / "squeue_requeued_finished_vs_stopped.22.05.json").read_text()
    job = next(j for j in parse_jobs(text) if j.job_id == 233)
    return dataclasses.replace(job, job_id=job_id, stdout_path=str(path), stderr_path=str(path))


def me(user: str) -> int:
    return os.getuid()


REQUEUED = 1796091583.0  # 2026-12-01T02:19:43Z


def test_marker_of_this_requeue_means_stopped(tmp_path: Path) -> None:
    out = tmp_path / "326.out"
    out.write_text(LINE.format(job=326, at="2026-12-01T02:19:43") + "\n")
    assert stopped_by_requeue(job_with_output(out, 326), REQUEUED, me) is True


def test_a_marker_of_an_earlier_requeue_or_another_job_does_not_count(tmp_path: Path) -> None:
    out = tmp_path / "326.out"
    earlier = LINE.format(job=326, at="2026-12-01T02:19:38")
    other = LINE.format(job=999, at="2026-12-01T02:19:43")
    out.write_text(f"{earlier}\nstep 9\n{other}\n")
    assert stopped_by_requeue(job_with_output(out, 326), REQUEUED, me) is False


def test_only_the_tail_is_read(tmp_path: Path) -> None:
    out = tmp_path / "326.out"
    out.write_text(LINE.format(job=326, at="2026-12-01T02:19:43") + "\n" + "x" * TAIL_BYTES)
    assert stopped_by_requeue(job_with_output(out, 326), REQUEUED, me) is False


def test_no_evidence_from_links_foreign_files_or_missing_ones(tmp_path: Path) -> None:
    real = tmp_path / "real.out"
    real.write_text(LINE.format(job=326, at="2026-12-01T02:19:43") + "\n")
    link = tmp_path / "link.out"
    link.symlink_to(real)
    assert stopped_by_requeue(job_with_output(link, 326), REQUEUED, me) is None
    someone_else = lambda user: os.getuid() + 1  # noqa: E731
    assert stopped_by_requeue(job_with_output(real, 326), REQUEUED, someone_else) is None
    assert stopped_by_requeue(job_with_output(tmp_path / "gone", 326), REQUEUED, me) is None
    assert stopped_by_requeue(job_with_output(real, 326), REQUEUED, lambda u: None) is None
