"""The sensitivity adjustment of fragment plans, with hand-worked sensitivities."""

from __future__ import annotations

import math

from hopsd.core.fragments import sensitivity_adjustment
from hopsd.core.model import Job


def jobs(*ids: str) -> list[Job]:
    return [Job(i, (1,), 1e6) for i in ids]


RHO = {"w1": 2.0, "w2": 1.8, "b1": 1.7, "b2": 1.1, "b3": 1.0, "inf": math.inf}


def test_admits_from_behind_until_the_set_is_no_more_sensitive_than_the_queue() -> None:
    # rho_set = (2.0 + 1.8) / 2 = 1.9 > rho_queue 1.5
    # b1: 1.7 is not below 1.5 -> skipped; b2: 1.1 -> set (2.0+1.8+1.1)/3 = 1.633 > 1.5
    # b3: 1.0 -> set (4.9 + 1.0)/4 = 1.475 <= 1.5 -> stop
    admitted = sensitivity_adjustment(
        jobs("w1", "w2"), jobs("b1", "b2", "b3"), lambda j: RHO[j.id], 1.5, lambda j: True
    )
    assert [j.id for j in admitted] == ["b2", "b3"]


def test_no_admission_when_the_window_is_already_insensitive() -> None:
    admitted = sensitivity_adjustment(
        jobs("b3"), jobs("b2"), lambda j: RHO[j.id], 1.5, lambda j: True
    )
    assert admitted == ()


def test_jobs_that_do_not_fit_are_not_admitted_and_infinite_rho_is_ignored() -> None:
    # the infinite sensitivity is left out of rho_set: set = {2.0} > 1.5
    admitted = sensitivity_adjustment(
        jobs("w1", "inf"), jobs("b2", "b3"), lambda j: RHO[j.id], 1.5, lambda j: j.id != "b2"
    )
    assert [j.id for j in admitted] == ["b3"]
