"""One parser and one resolver of Slurm job-id text, on squeue's recorded output of a held
array (Slurm 22.05): task 0 of array 1 is job 1, task 1 was split off as job 2, and array
60 keeps its tasks 0-3 inside its own record."""

from __future__ import annotations

from pathlib import Path

import pytest

from hopsd.slurm.parse_squeue import parse_jobs
from hopsd.slurm.port import JobRef, job_id_arg, parse_job_ref, resolve_job

FIXTURE = Path(__file__).parents[1] / "fixtures" / "slurm" / "squeue_array_held.22.05.json"
JOBS = parse_jobs(FIXTURE.read_text())


@pytest.mark.parametrize(
    ("text", "ref"),
    [("42", JobRef(42)), ("26_1", JobRef(26, 1)), ("26_0", JobRef(26, 0))],
)
def test_parse(text: str, ref: JobRef) -> None:
    assert parse_job_ref(text) == ref and str(ref) == text


@pytest.mark.parametrize(
    "text", ["", "0", "-1", "26_", "_1", "1_2_3", "\u00b2", "26_[1-3]", "1;rm", " 5", "12345678901"]
)
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a Slurm job id"):
        parse_job_ref(text)


@pytest.mark.parametrize(
    ("text", "job_id"),
    [("1", 1), ("2", 2), ("60", 60), ("1_0", 1), ("1_1", 2)],
)
def test_a_listed_job_or_split_task_is_that_job(text: str, job_id: int) -> None:
    found = resolve_job(parse_job_ref(text), JOBS)
    assert not isinstance(found, JobRef) and found is not None and found.job_id == job_id


def test_a_task_inside_its_arrays_record_is_named_by_itself() -> None:
    assert resolve_job(parse_job_ref("60_2"), JOBS) == JobRef(60, 2)
    assert job_id_arg(JobRef(60, 2)) == "60_2"


@pytest.mark.parametrize("text", ["60_7", "3", "1_5", "99_0"])
def test_what_slurm_does_not_list_is_none(text: str) -> None:
    assert resolve_job(parse_job_ref(text), JOBS) is None
