"""Service window: the head of the queue whose minimum demands just reach the cluster size."""

from __future__ import annotations

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.core.model import Job
from hopsd.core.window import service_window


def job(job_id: str, *demands: int) -> Job:
    return Job(id=job_id, demands=tuple(demands), total_samples=1000.0)


def ids(jobs: tuple[Job, ...]) -> list[str]:
    return [j.id for j in jobs]


def test_window_includes_the_job_at_which_the_sum_crosses_the_cluster_size() -> None:
    queue = [job("a", 2, 4), job("b", 3), job("c", 4, 8), job("d", 1)]
    # R1 sums: 2, 5, 9 >= 8 -> stop at c, c included
    assert ids(service_window(queue, 8)) == ["a", "b", "c"]


def test_window_stops_when_the_sum_reaches_exactly() -> None:
    queue = [job("a", 4), job("b", 4), job("c", 1)]
    assert ids(service_window(queue, 8)) == ["a", "b"]


def test_window_is_the_whole_queue_when_demands_do_not_fill_the_cluster() -> None:
    queue = [job("a", 1), job("b", 2)]
    assert ids(service_window(queue, 16)) == ["a", "b"]


def test_first_job_larger_than_the_cluster_is_the_whole_window() -> None:
    queue = [job("big", 32), job("small", 1)]
    assert ids(service_window(queue, 8)) == ["big"]


def test_no_gpus_no_window_and_negative_is_refused() -> None:
    assert service_window([job("a", 1)], 0) == ()
    with pytest.raises(InvalidInputError, match="total GPUs"):
        service_window([job("a", 1)], -1)
