"""One meaning per Slurm failure, whether Slurm's words came from a command or slurmrestd.

Every case is recorded output: the command backend's stderr (``err_*.txt``) and
slurmrestd's ``errors``/``status`` entries (``rest/err_*.json``) for the same
failure must map to the same :class:`Failure`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hopsd.slurm.classify import Failure, failure_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def _command_words(name: str) -> str:
    return (FIXTURES / name).read_text()


def _rest_entries(name: str) -> list[tuple[str, set[object]]]:
    """(words, numbers) of every error entry of a recorded slurmrestd reply."""
    doc: dict[str, Any] = json.loads((FIXTURES / "rest" / name).read_text())
    out: list[tuple[str, set[object]]] = []
    for err in doc.get("errors") or []:
        said = ": ".join(str(err[k]) for k in ("error", "description") if err.get(k))
        out.append((said, {err.get("error_number")}))
    for entry in doc.get("status") or []:
        err = entry.get("error") or {}
        if err.get("code"):
            out.append((str(err.get("message") or ""), {err.get("code")}))
    return out


@pytest.mark.parametrize(
    ("command_fixture", "rest_fixture", "failure"),
    [
        (
            "err_release_unknown.24.11.txt",
            "err_release_unknown.v0.0.42.24.11.json",
            Failure.NOT_FOUND,
        ),
        (
            "err_update_unknown.22.05.txt",
            "err_signal_unknown.v0.0.42.24.11.json",
            Failure.NOT_FOUND,
        ),
        (
            "err_squeue_no_controller.24.11.txt",
            "err_ctld_down.v0.0.42.24.11.json",
            Failure.UNAVAILABLE,
        ),
        ("err_sbatch_badpart.24.11.txt", "err_submit_badpart.v0.0.42.24.11.json", Failure.OTHER),
    ],
)
def test_both_backends_read_one_failure_alike(
    command_fixture: str, rest_fixture: str, failure: Failure
) -> None:
    assert failure_of(_command_words(command_fixture)) is failure
    entries = _rest_entries(rest_fixture)
    assert entries, f"{rest_fixture} records no error entry"
    assert {failure_of(said, numbers) for said, numbers in entries} == {failure}


def test_number_alone_decides_when_words_differ() -> None:
    assert failure_of("something new", {2017}) is Failure.NOT_FOUND
    assert failure_of("something new", {2021}) is Failure.ALREADY_DONE
    assert failure_of("Invalid job id specified", {6001}) is Failure.AUTH


def test_unreachable_controller_is_never_read_as_unknown_job() -> None:
    said = "Unable to contact slurm controller (connect failure); Invalid job id specified"
    assert failure_of(said) is Failure.UNAVAILABLE


def test_ended_job_cancel_reads_as_already_done() -> None:
    entries = _rest_entries("cancel_done.v0.0.42.24.11.json")
    assert {failure_of(s, n) for s, n in entries} == {Failure.ALREADY_DONE}
    assert (
        failure_of("scancel: error: Job/step already completing or completed")
        is Failure.ALREADY_DONE
    )
