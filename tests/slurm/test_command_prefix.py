"""`[slurm] command_prefix`: every Slurm command of the CLI backend goes through the prefix."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hopsd.config import ConfigError, parse_config
from hopsd.slurm.factory import make_port
from hopsd.slurm.port import SubmitRequest
from hopsd.slurm.runner import CompletedRun, PrefixRunner
from hopsd.slurm.tag import HopsTag


class Recorder:
    """A runner that answers like an empty cluster and remembers what it ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> CompletedRun:
        self.calls.append(tuple(argv))
        out = '{"jobs": [], "nodes": []}' if "--json" in argv else "42\n"
        return CompletedRun(tuple(argv), 0, out, "")


def test_prefix_goes_before_every_command_and_results_name_the_command() -> None:
    inner = Recorder()
    run = PrefixRunner(inner, ("ssh", "slurm-head"))
    done = run(["squeue", "--json"], 5.0)
    assert inner.calls == [("ssh", "slurm-head", "squeue", "--json")]
    assert done.argv == ("squeue", "--json")


def test_make_port_wraps_reads_and_writes() -> None:
    inner = Recorder()
    port = make_port("cli", run=inner, timeout_s=5.0, command_prefix=["/opt/slurm-exec"])
    port.list_jobs()
    port.list_nodes()
    job = port.submit(SubmitRequest("/tmp/job.sh", tag=HopsTag((1,), 100.0, 32)))
    port.release(job)
    assert job == 42
    assert [c[0] for c in inner.calls] == ["/opt/slurm-exec"] * 4
    assert [c[1] for c in inner.calls] == ["squeue", "sinfo", "sbatch", "scontrol"]


def test_no_prefix_runs_commands_as_they_are() -> None:
    inner = Recorder()
    make_port("cli", run=inner, timeout_s=5.0).list_jobs()
    assert inner.calls[0][0] == "squeue"


def test_config_reads_the_prefix_as_words() -> None:
    config = parse_config('[slurm]\ncommand_prefix = ["ssh", "-q", "slurm-head"]\n')
    assert config.slurm_command_prefix == ("ssh", "-q", "slurm-head")
    assert parse_config("").slurm_command_prefix == ()


@pytest.mark.parametrize("value", ['"ssh slurm-head"', '["ssh", ""]', "[1]"])
def test_config_rejects_a_prefix_that_is_not_a_list_of_words(value: str) -> None:
    with pytest.raises(ConfigError, match="command_prefix"):
        parse_config(f"[slurm]\ncommand_prefix = {value}\n")
