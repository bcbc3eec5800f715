"""``hops status``'s table rows, made from each job's line, say what its ``--json``
document says of the job, as the table spells each field."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hops_cli.status_report import COLUMNS, line_cells
from hopsd.ledger.records import Forecast, JobLine, JobState
from hopsd.views.cells import demands, duration, placement, ratio
from hopsd.views.joblist import DaemonState, job_record

NOW = 1_000_000.0


def spelled(job: dict[str, Any]) -> tuple[str, ...]:
    """The document's fields of one job as the table's columns spell them, in COLUMNS order."""
    start = job["start_in_s"]
    return (
        str(job["job_id"]),
        job["name"],
        job["user"],
        job["state"],
        job["gpu_type"] or "-",
        placement(job["nodes"]) or "-",
        demands(job["demands"]),
        duration(job["wait_s"]),
        duration(job["elapsed_s"]),
        str(job["restarts"]),
        ratio(job["latency_ratio"]),
        "-" if start is None else f"+{duration(start)}",
        duration(job["eta_s"]),
        job["estimate_source"] or "-",
        job["reason"] or "-",
    )


#: Seconds where a rounding the document makes changes how the table spells them.
EDGES = st.sampled_from([0.04, 89.94, 89.96, 5399.94, 5399.96, 0.1249, 0.125, 0.1251])
times = st.one_of(
    st.none(),
    st.floats(NOW - 90_000, NOW + 90_000),
    EDGES.map(lambda s: NOW - s),
    EDGES.map(lambda s: NOW + s),
)
texts = st.sampled_from(["", "why", "running on a100 a100n1:2", "moved to v100 v100n1:1"])
parts = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.sampled_from(["a100n1", "a100n2", "v100n1"]), st.integers(1, 8)),
        min_size=1,
        max_size=3,
        unique_by=lambda p: p[0],
    ).map(tuple),
)


@st.composite
def lines(draw: st.DrawFn) -> JobLine:
    submit = draw(st.floats(NOW - 90_000, NOW))
    start = draw(times)
    return JobLine(
        id=draw(st.sampled_from(["j1", "j2"])),
        slurm_job_id=draw(st.one_of(st.none(), st.integers(1, 10**7))),
        user="u",
        account="a",
        script_path=draw(st.sampled_from(["", "/home/u/train.sh"])),
        demands=tuple(draw(st.lists(st.integers(1, 16), min_size=1, max_size=4))),
        total_samples=1e6,
        model_name=draw(st.sampled_from(["", "resnet50"])),
        state=draw(st.sampled_from(list(JobState))),
        state_reason=draw(texts),
        submit_time=submit,
        first_start_time=start,
        end_time=draw(st.one_of(st.none(), st.floats(NOW - 1000, NOW))),
        wait_time=draw(st.one_of(st.floats(0, 90_000), EDGES)),
        restarts=draw(st.integers(0, 9)),
        samples_done=0.0,
        estimate_source=draw(st.sampled_from([None, "type", "entity"])),
        current_gpu_type=draw(st.sampled_from([None, "a100", "v100"])),
        current_parts=draw(parts),
        latency_ratio=draw(st.one_of(st.none(), st.floats(0, 50), EDGES)),
        ftf_rho=None,
        input_problem=draw(st.sampled_from(["", "bad tag"])),
        plan_reason=draw(texts),
        name=draw(st.sampled_from(["", "sweep-lr0.1"])),
    )


forecasts = st.one_of(st.none(), st.builds(Forecast, times, times))
daemons = st.builds(
    DaemonState,
    st.sampled_from(["running", "shadow", "stopped"]),
    st.just("h:1"),
    st.none(),
    st.none(),
)


@settings(max_examples=1500, deadline=None)
@given(lines(), forecasts, daemons, st.one_of(st.none(), st.integers(1, 50)))
def test_a_row_says_what_the_document_says(
    line: JobLine, said: Forecast | None, daemon: DaemonState, position: int | None
) -> None:
    document = job_record(line, NOW, daemon, said, position)
    assert line_cells(line, said, NOW, daemon) == spelled(document)


def test_the_cells_come_in_the_columns_order() -> None:
    line = JobLine(
        id="j1", slurm_job_id=42, user="u", account="a", script_path="/x/train.sh",
        demands=(1, 2), total_samples=1e6, model_name="m", state=JobState.RUNNING,
        state_reason="", submit_time=NOW - 600, first_start_time=NOW - 300, end_time=None,
        wait_time=300.0, restarts=1, samples_done=0.0, estimate_source="type",
        current_gpu_type="a100", current_parts=(("a100n1", 2),), latency_ratio=0.5,
        ftf_rho=None, input_problem="", plan_reason="",
    )  # fmt: skip
    cells = dict(
        zip(COLUMNS, line_cells(line, Forecast(None, NOW + 120), NOW, RUNNING), strict=True)
    )
    assert cells["JOBID"] == "42" and cells["NAME"] == "train.sh" and cells["TYPE"] == "a100"
    assert cells["NODES"] == "a100n1:2" and cells["ELAPSED"] == "5m" and cells["ETA"] == "2m"
    assert cells["REASON"] == "running on a100 a100n1:2" and cells["START"] == "-"


RUNNING = DaemonState("running", "h:1", None, None)
