"""``--test-only`` asked of hopsd over its socket, for users who may not read its ledger.

hopsd forecasts on everything it sees and answers with the asked job's times
only; a user Slurm hides other jobs from gets no job counts; one forecast per
user every few seconds, whatever they send.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from hopsd.core.privacy import PrivateData
from hopsd.daemon.readservice import ReadService
from hopsd.daemon.test_only import FORECAST, Forecaster, ForecastRefused, ask_hopsd
from hopsd.ledger.errors import LedgerUnavailableError
from hopsd.ledger.migrate import upgrade
from hopsd.slurm.privacy import SlurmPrivacy
from hopsd.slurm.tag import HopsTag

TAG = HopsTag((1, 2), 24000.0, 32, types=("v100",))


class Counting:
    """A forecast that says what it was asked, and counts how often it ran."""

    def __init__(self) -> None:
        self.asked: list[tuple[HopsTag, str]] = []

    def __call__(self, tag: HopsTag, user: str) -> dict[str, Any]:
        self.asked.append((tag, user))
        return {
            "made_at": 1.0,
            "queued_jobs": 3,
            "running_jobs": 2,
            "expected": {"gpu_type": tag.types[0], "gpus": tag.demands[-1], "start_at": 5.0},
            "options": [],
        }


@pytest.fixture
def served(tmp_path: Path) -> Any:
    ledger = tmp_path / "ledger.sqlite"
    upgrade(f"sqlite:///{ledger}")
    compute = Counting()
    service = ReadService(ledger, lambda: SlurmPrivacy(PrivateData(jobs=True)), Forecaster(compute))
    service.start()
    try:
        yield ledger, compute
    finally:
        service.close()


def test_hopsd_answers_a_forecast_for_the_tag_it_is_sent(served: Any) -> None:
    ledger, compute = served
    answer = ask_hopsd(ledger, ledger.stat().st_uid, TAG)
    assert answer["expected"] == {"gpu_type": "v100", "gpus": 2, "start_at": 5.0}
    assert answer["running_jobs"] == 2  # the caller (root) is trusted: counts kept
    assert [(tag.demands, tag.types) for tag, _ in compute.asked] == [((1, 2), ("v100",))]


def test_a_user_who_asks_again_at_once_gets_the_same_answer_or_a_refusal(served: Any) -> None:
    ledger, compute = served
    first = ask_hopsd(ledger, ledger.stat().st_uid, TAG)
    assert ask_hopsd(ledger, ledger.stat().st_uid, TAG) == first
    other = HopsTag((4,), 1000.0, 32, types=("a100",))
    with pytest.raises(LedgerUnavailableError, match="one forecast per"):
        ask_hopsd(ledger, ledger.stat().st_uid, other)
    assert len(compute.asked) == 1


def test_a_malformed_or_endless_tag_is_refused_and_the_service_goes_on(served: Any) -> None:
    ledger, compute = served
    where = str(ledger.with_name(ledger.name + ".sock"))
    for sent in (FORECAST + b'{"demands": [0]}\n', FORECAST + b"x" * 9000):
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(10)
            conn.connect(where)
            conn.sendall(sent)
            reply = conn.recv(4096)
        assert reply.startswith(b"refused:"), reply
    assert compute.asked == []
    assert ask_hopsd(ledger, ledger.stat().st_uid, TAG)["expected"]["gpus"] == 2


def test_a_viewer_slurm_hides_other_jobs_from_gets_no_job_counts() -> None:
    compute = Counting()
    forecaster = Forecaster(compute)
    hidden = forecaster.answer(TAG.encode(), "alice", hides_others=True)
    assert hidden["queued_jobs"] is None and hidden["running_jobs"] is None
    assert hidden["expected"]["start_at"] == 5.0
    shown = forecaster.answer(TAG.encode(), "bob", hides_others=False)
    assert shown["queued_jobs"] == 3
    with pytest.raises(ForecastRefused, match="not a job hops could run"):
        Forecaster(compute).answer("not a tag", "carol", hides_others=True)
