"""Trace CSV: round trip and the line named in every error."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import tiny_jobs

from hopsd.sim.trace import TraceError, read_trace, write_trace

HEADER = "job_id,submit_time_s,demands,total_samples,model,user,batch_size\n"


def _write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(header + body, encoding="utf-8")
    return path


def test_round_trip(tmp_path: Path) -> None:
    jobs = tiny_jobs()
    path = tmp_path / "trace.csv"
    write_trace(path, jobs)
    assert read_trace(path, known_models={"toy", "other"}) == jobs


def test_optional_columns_default(tmp_path: Path) -> None:
    path = _write(tmp_path, "5,1|2,100,toy\n", header="submit_time_s,demands,total_samples,model\n")
    (job,) = read_trace(path)
    assert job.job_id == "line2"
    assert job.demands == (1, 2)
    assert job.batch_size is None
    assert job.user == ""


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ("j1,soon,1|2,100,toy,u,\n", "submit_time_s 'soon' is not a number"),
        ("j1,0,4|2,100,toy,u,\n", "strictly increasing"),
        ("j1,0,1;2,100,toy,u,\n", "separated by '|'"),
        ("j1,0,1,-5,toy,u,\n", "total_samples must be > 0"),
        ("j1,0,1,100,bert,u,\n", "unknown model 'bert'"),
        ("j1,0,1,100,toy,u,big\n", "batch_size 'big'"),
        ("j1,0,,100,toy,u,\n", "missing value for 'demands'"),
        ("j1,0,1,100,toy,u,,extra\n", "more fields than the header"),
    ],
)
def test_bad_row_names_its_line(tmp_path: Path, row: str, needle: str) -> None:
    path = _write(tmp_path, "j0,0,1,100,toy,u,\n" + row)
    with pytest.raises(TraceError) as info:
        read_trace(path, known_models={"toy"})
    assert "line 3" in str(info.value)
    assert needle in str(info.value)


def test_duplicate_ids_and_bad_header(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="line 3: job_id 'j0' appears twice"):
        read_trace(_write(tmp_path, "j0,0,1,100,toy,u,\nj0,1,1,100,toy,u,\n"))
    with pytest.raises(TraceError, match="line 1: header lacks"):
        read_trace(_write(tmp_path, "0,1\n", header="submit_time_s,demands\n"))
    with pytest.raises(TraceError, match="unknown column"):
        read_trace(_write(tmp_path, "", header="submit_time_s,demands,total_samples,model,gpu\n"))
    with pytest.raises(TraceError, match="no jobs"):
        read_trace(_write(tmp_path, ""))
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path / "missing.csv")
