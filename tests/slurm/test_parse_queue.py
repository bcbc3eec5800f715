"""The narrow ``squeue --Format`` read against the JSON of the same moment (recorded, 22.05).

``queue_mix.22.05.format.txt.xz`` and ``queue_mix.22.05.json.xz`` were recorded
back to back on the test cluster by ``tests/slurm/record_narrow_queue.py``: a
held tagged job, jobs running on one node and on two (even and uneven
splits), a job array, finished and failed jobs, a requeued held job, a name
with a bar and a 300-character name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from recorded import recorded

from hopsd.daemon.observe import job_view, read_queue
from hopsd.slurm.cli_backend import CliSlurm
from hopsd.slurm.parse_queue import (
    FIELDS,
    SEPARATOR,
    NarrowReadRefused,
    parse_queue,
    queue_argv,
)
from hopsd.slurm.parse_squeue import parse_jobs
from hopsd.slurm.port import SlurmJob
from hopsd.slurm.runner import CompletedRun


def queue_mix(suffix: str) -> str:
    return recorded(f"queue_mix.22.05.{suffix}.xz")


@pytest.fixture(scope="module")
def pair() -> tuple[str, str]:
    return queue_mix("format.txt"), queue_mix("json")


def by_name(jobs: Sequence[SlurmJob], name: str) -> SlurmJob:
    """The latest job of that name (the recording also holds an earlier, cancelled set)."""
    return max((j for j in jobs if j.name == name), key=lambda j: j.job_id)


def test_every_job_observes_as_in_the_json(pair: tuple[str, str]) -> None:
    """What the tick reads of each job (its observed view) is the JSON's, field for field."""
    narrow = parse_queue(pair[0])
    full = {j.job_id: j for j in parse_jobs(pair[1])}
    assert {j.job_id for j in narrow.jobs} == set(full)
    compared = 0
    for job in narrow.jobs:
        if job.job_id in narrow.needs_detail:
            continue
        mine, theirs = job_view(job), job_view(full[job.job_id])
        if " " in job.reason:  # squeue prints Slurm's description of a finished job's reason
            assert job.finished and theirs.reason == "JobHeldUser"
            theirs = dataclasses.replace(theirs, reason=job.reason)
        assert mine == theirs, job.job_id
        compared += 1
    assert compared == len(full) - 2


def test_the_jobs_the_format_cannot_tell_are_named(pair: tuple[str, str]) -> None:
    """An uneven two-node split and a requeued held job's reason code need the JSON."""
    narrow = parse_queue(pair[0])
    full = parse_jobs(pair[1])
    uneven, requeued = by_name(full, "uneven"), by_name(full, "rq")
    assert sorted(g for _, g in uneven.gpus_by_node) == [1, 3]
    assert requeued.reason == "JobHeldUser"  # the JSON's code; squeue prints a description
    assert by_name(narrow.jobs, "rq").reason == "job requeued in held state"
    assert narrow.needs_detail == {uneven.job_id, requeued.job_id}


def test_splits_the_format_does_tell(pair: tuple[str, str]) -> None:
    narrow = parse_queue(pair[0])
    assert by_name(narrow.jobs, "two|nodes even").gpus_by_node == (("a100n1", 1), ("a100n2", 1))
    assert by_name(narrow.jobs, "one node").gpus_by_node == (("a100n1", 2),)
    assert by_name(narrow.jobs, "x" * 300).held  # the long name is whole, not cut


def test_a_separator_in_a_users_text_refuses_the_read(pair: tuple[str, str]) -> None:
    line = next(x for x in pair[0].splitlines() if "two|nodes even" in x)
    with pytest.raises(NarrowReadRefused):
        parse_queue(line.replace("two|nodes", f"two{SEPARATOR}nodes") + "\n")
    name_at = FIELDS.index("Name")
    cut = SEPARATOR.join(line.split(SEPARATOR)[: name_at + 1])
    with pytest.raises(NarrowReadRefused):  # a newline in a name splits the line
        parse_queue(f"{cut}\nrest{SEPARATOR}(null){SEPARATOR}\n")


class Replay:
    """A runner that answers the narrow read and the JSON read from recordings."""

    def __init__(self, narrow: str, full: str) -> None:
        self.narrow, self.full = narrow, full
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> CompletedRun:
        self.calls.append(tuple(argv))
        out = self.full if "--json" in argv else self.narrow
        return CompletedRun(tuple(argv), 0, out, "")


def test_list_queue_reads_the_json_once_then_remembers(pair: tuple[str, str]) -> None:
    """The first read completes the two jobs from the JSON; later ticks need one call."""
    runner = Replay(*pair)
    port = CliSlurm(run=runner)
    first = port.list_queue()
    assert runner.calls == [tuple(queue_argv()), ("squeue", "--json", "--states=all")]
    runner.calls.clear()
    second = {j.job_id: j for j in port.list_queue()}
    assert runner.calls == [tuple(queue_argv())]
    for job in first:
        mine, theirs = job_view(second[job.job_id]), job_view(job)
        if job.finished and job.reason != mine.reason:
            theirs = dataclasses.replace(theirs, reason=mine.reason)
        assert mine == theirs, job.job_id


def test_list_queue_reads_the_json_again_when_the_job_changes(pair: tuple[str, str]) -> None:
    runner = Replay(*pair)
    port = CliSlurm(run=runner)
    port.list_queue()
    runner.narrow = runner.narrow.replace(
        "job requeued in held state", "launch failed requeued held"
    )
    runner.calls.clear()
    port.list_queue()
    assert len(runner.calls) == 2 and "--json" in runner.calls[1]


def test_list_queue_falls_back_to_the_json_on_a_refused_reply(pair: tuple[str, str]) -> None:
    runner = Replay(pair[0].replace("two|nodes", f"two{SEPARATOR}nodes"), pair[1])
    jobs = CliSlurm(run=runner).list_queue()
    assert len(runner.calls) == 2
    assert {j.job_id for j in jobs} == {j.job_id for j in parse_jobs(pair[1])}


def test_observe_takes_the_narrow_read_where_the_port_has_one() -> None:
    class Both:
        def list_queue(self) -> list[str]:
            return ["narrow"]

        def list_jobs(self) -> list[str]:
            return ["full"]

    class FullOnly:
        def list_jobs(self) -> list[str]:
            return ["full"]

    assert read_queue(Both()) == ["narrow"]  # type: ignore[arg-type]
    assert read_queue(FullOnly()) == ["full"]  # type: ignore[arg-type]


def test_times_are_asked_as_epoch_seconds() -> None:
    """``SLURM_TIME_FORMAT=%s``: no time zone between squeue's host and hopsd's."""
    argv = queue_argv()
    assert argv[:3] == ["env", "SLURM_TIME_FORMAT=%s", "squeue"]


def test_an_unchanged_line_is_not_parsed_again(pair: tuple[str, str]) -> None:
    """Between ticks most of a queue is the same text: its jobs are taken from the last read."""
    memo: dict[str, tuple[SlurmJob, bool]] = {}
    first = parse_queue(pair[0], memo)
    assert first == parse_queue(pair[0])
    changed = pair[0].replace("two|nodes even", "two|nodes renamed")
    second = parse_queue(changed, memo)
    assert second.needs_detail == first.needs_detail
    for old, new in zip(first.jobs, second.jobs, strict=True):
        if old.name == "two|nodes even":
            assert new.name == "two|nodes renamed" and new is not old
        else:
            assert new is old  # the very object: not parsed again
    assert len(memo) == len(second.jobs)
    with pytest.raises(NarrowReadRefused):
        parse_queue(changed.replace("renamed", f"re{SEPARATOR}named"), memo)
    assert parse_queue(changed, memo) == second  # a refused read leaves the memo as it was
