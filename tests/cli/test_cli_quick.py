"""``hops status`` without typer: the quick parser knows the typer command's options, reads
command lines as click does, and leaves everything else (help, errors) to typer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from hops_cli.main import app
from hops_cli.quick import FLAG, MANY, NUMBER, STATUS, parse, split_config

HOPS = str(Path(sys.executable).parent / "hops")


def _status_command() -> Any:
    group = typer.main.get_command(app)
    ctx = group.make_context("hops", ["status"])
    return group.get_command(ctx, "status")  # type: ignore[attr-defined]


def test_spec_lists_exactly_the_typer_commands_options() -> None:
    command = _status_command()
    options = {
        p.name: p for p in command.params if p.param_type_name == "option" and p.name != "help"
    }
    assert set(options) == {o.dest for o in STATUS}
    for opt in STATUS:
        theirs = options[opt.dest]
        assert set(theirs.opts) | set(theirs.secondary_opts) == set(opt.names), opt.dest
        assert theirs.is_flag == (opt.kind == FLAG), opt.dest
        assert theirs.multiple == (opt.kind == MANY), opt.dest
        if opt.kind == NUMBER:
            assert float(theirs.default) == opt.default
        elif opt.kind == FLAG:
            assert theirs.default is False and opt.default is False
        else:
            assert theirs.default is None and opt.default is None
    (argument,) = [p for p in command.params if p.param_type_name == "argument"]
    assert argument.name == "job_ids" and argument.nargs == -1


LINES = [
    [],
    ["--all"],
    ["-a", "--json"],
    ["-ah"],
    ["26_1", "27", "-u", "alice", "--user=bob,carol", "-ubob"],
    ["--me", "-t", "running,queued", "--state", "done", "-p", "v100"],
    ["-o", "jobid,state", "--noheader", "--parsable"],
    ["--states", "PD", "-t", "R", "--states=CD", "-P"],
    ["-hP", "-tPD", "-aP"],
    ["-ojobid", "--format=name"],
    ["--window", "2.5", "12"],
    ["--window=7"],
    ["--", "-5"],
    ["-o", "-x"],
]


@pytest.mark.parametrize("argv", LINES, ids=[" ".join(a) or "(none)" for a in LINES])
def test_quick_parse_reads_what_click_reads(argv: list[str]) -> None:
    ctx = _status_command().make_context("status", list(argv))
    theirs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in ctx.params.items()}
    theirs = {k: (v or None) if isinstance(v, list) else v for k, v in theirs.items()}
    mine = parse(argv, STATUS, "job_ids")
    assert mine is not None
    assert {k: (float(v) if k == "window_h" else v) for k, v in theirs.items()} == mine


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--nope"],
        ["-x"],
        ["--window", "1e3"],
        ["--window", "many"],
        ["--me=yes"],
        ["-o"],
        ["-5"],
        ["--all", "--format"],
    ],
)
def test_anything_unsure_goes_to_typer(argv: list[str]) -> None:
    assert parse(argv, STATUS, "job_ids") is None


def test_group_config_option_before_the_command() -> None:
    assert split_config(["-c", "f.conf", "status", "-a"]) == ("f.conf", ["status", "-a"])
    assert split_config(["--config=g", "status"]) == ("g", ["status"])
    assert split_config(["-cf", "status"]) == ("f", ["status"])
    assert split_config(["--version"]) is None


def _hops(*argv: str, probe: bool = False) -> subprocess.CompletedProcess[str]:
    """``hops ARGV`` as a user runs it; with ``probe``, also list what it imported."""
    code = (
        "import sys; sys.argv = ['hops', *sys.argv[1:]]\n"
        "from hops_cli.launch import run\n"
        "try:\n    run()\nexcept SystemExit as e:\n    code = e.code\n"
        "print(sorted(m for m in ('typer', 'sqlalchemy', 'pydantic', 'rich') "
        "if m in sys.modules), file=sys.stderr)\nsys.exit(code)\n"
    )
    command = [sys.executable, "-c", code, *argv] if probe else [HOPS, *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_status_runs_without_typer_and_prints_what_typer_prints(ledger: str, port: Any) -> None:
    del port  # in-process the fake port answers; the columns shown do not depend on Slurm
    argv = ["status", "--all", "-o", "jobid,name,user,state,type,nodes,demands", "--parsable"]
    quick = _hops(*argv, probe=True)
    assert quick.returncode == 0, quick.stderr
    assert quick.stderr.strip().splitlines()[-1] == "[]"
    slow = CliRunner().invoke(app, argv)
    assert slow.exit_code == 0 and quick.stdout == slow.stdout
    assert quick.stdout.splitlines()[0] == "JOBID|NAME|USER|STATE|TYPE|NODES|DEMANDS"


def test_usage_errors_are_typers_one_line(ledger: str) -> None:
    quick = _hops("status", "--nope")
    assert quick.returncode == 2
    assert quick.stderr.startswith("hops: status: No such option: --nope")
    assert len(quick.stderr.strip().splitlines()) == 1
    wrong = _hops("status", "-t", "sleeping")
    assert wrong.returncode == 2 and wrong.stderr.startswith("hops: unknown state sleeping")


def test_help_is_typers(ledger: str) -> None:
    shown = _hops("status", "--help")
    assert shown.returncode == 0 and "--noheader" in shown.stdout and "Usage" in shown.stdout


def test_missing_ledger_is_one_line(tmp_path: Path) -> None:
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "sqlite:///{tmp_path / "none.db"}"\n')
    result = subprocess.run(
        [HOPS, "-c", str(conf), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ},
    )
    assert result.returncode == 1 and result.stderr.startswith("hops: no ledger at ")
    assert not (tmp_path / "none.db").exists()


def test_a_reader_that_stops_early_ends_the_status_quietly(tmp_path: Path) -> None:
    """``hops status --all | head -1``: hops stops as squeue does, with 128 + SIGPIPE and no
    traceback (before, Python's BrokenPipeError and its failed flush at exit were printed)."""
    from hopsd.ledger.migrate import upgrade
    from hopsd.ledger.records import JobSpec, JobState
    from hopsd.ledger.unit import Ledger

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    upgrade(url)
    ledger = Ledger.open(url)
    with ledger.unit() as unit:
        for i in range(1500):  # some 200 kB of table: more than a pipe holds
            job = unit.add_job(JobSpec(f"j{i}", "alice", (1, 2), 1e6, 1e9, slurm_job_id=i + 1), 1e9)
            unit.transition(job.id, JobState.QUEUED, 1e9)
    ledger.dispose()
    conf = tmp_path / "hops.conf"
    conf.write_text(f'[ledger]\nurl = "{url}"\n')
    env = {**os.environ, "HOPS_CONF": str(conf)}
    reader = subprocess.Popen(
        [HOPS, "status", "--all"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert reader.stdout is not None and reader.stdout.readline().startswith(b"JOBID")
    reader.stdout.close()
    _, err = reader.communicate(timeout=60)
    assert reader.returncode == 141
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err
