"""Helpers of the live daemon tests: a private ledger and spool, submitting and waiting.

Every live test adopts only jobs whose name carries its own prefix, so tests of
other parts running on the same test cluster are never touched.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import hops_conf
import pytest
from faulty_hopsd import command
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hopsd.config import HopsConfig, parse_config
from hopsd.daemon.views import ObservedJob
from hopsd.ledger import migrate
from hopsd.ledger.engine import make_engine, make_sessionmaker
from hopsd.ledger.jobs import TERMINAL_STATES
from hopsd.ledger.models import JobRow
from hopsd.slurm.factory import make_port
from hopsd.slurm.port import SlurmPort, SubmitRequest
from hopsd.slurm.runner import CountingRunner, SubprocessRunner
from hopsd.slurm.tag import HopsTag

TRAIN_JOB = Path(__file__).with_name("train_job.py")
CLUSTER_SH = Path(__file__).resolve().parents[2] / "docker" / "cluster.sh"

#: Marks of a test that needs the live Slurm test cluster.
LIVE = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        not os.environ.get("SLURM_CONF"), reason="SLURM_CONF unset: no test cluster"
    ),
]


def cluster(command: str) -> None:
    """Run ``docker/cluster.sh COMMAND`` on the test cluster (stop-ctld, start-ctld...)."""
    subprocess.run(["bash", str(CLUSTER_SH), command], check=True, timeout=90, capture_output=True)


PYTHON = sys.executable


def conf_text(
    ledger: Path,
    spool: Path,
    extra: str = "",
    grace_s: float = 0.0,
    scheduler: str = "",
    round_s: float = 8.0,
) -> str:
    """A live test's hops.conf; ``grace_s`` > 0 gives jobs a checkpoint notice before moves.

    ``extra`` goes into the ``[daemon]`` table, ``scheduler`` into ``[scheduler]``;
    ``round_s`` is the round length (short, so tests are quick; a test that needs
    moves of jobs whose restarts cost more than a round needs longer rounds).
    """
    changes = {
        "scheduler": {"round_length_s": round_s},
        "daemon": {"lease_ttl_s": 3.0, "checkpoint_grace_s": grace_s},
    }
    tables = hops_conf.live(f"sqlite:///{ledger}", spool, changes)
    return hops_conf.render(tables, {"daemon": extra, "scheduler": scheduler})


@dataclass
class LiveEnv:
    """One live test's world: config file, ledger, spool, port and job-name prefix."""

    root: Path
    config_path: Path
    config: HopsConfig
    sessions: sessionmaker[Session]
    port: SlurmPort
    runner: CountingRunner
    prefix: str
    submitted: list[int]
    blockers: list[int]

    @staticmethod
    def create(
        root: Path, extra: str = "", grace_s: float = 0.0, scheduler: str = "", round_s: float = 8.0
    ) -> LiveEnv:
        spool = root / "spool"
        spool.mkdir(parents=True, exist_ok=True)
        ledger = root / "ledger.sqlite"
        text = conf_text(ledger, spool, extra, grace_s, scheduler, round_s)
        path = root / "hops.conf"
        path.write_text(text)
        config = parse_config(text, str(path))
        migrate.upgrade(config.ledger_url)
        sessions = make_sessionmaker(make_engine(config.ledger_url, sqlite_begin="immediate"))
        runner = CountingRunner(SubprocessRunner())
        port = make_port("cli", run=runner, timeout_s=config.slurm_timeout_s)
        prefix = f"hopst{uuid.uuid4().hex[:6]}-"
        return LiveEnv(root, path, config, sessions, port, runner, prefix, [], [])

    @property
    def spool_root(self) -> Path:
        """hops.conf ``daemon.spool_dir``: hopsd's, with one directory per user inside."""
        return Path(self.config.spool_dir)

    @property
    def spool(self) -> Path:
        """The spool directory of this test's own jobs (its user's, made by hopsd)."""
        return self.spool_of(getpass.getuser())

    def spool_of(self, user: str) -> Path:
        return self.spool_root / user

    def adopt_filter(self) -> Callable[[ObservedJob], bool]:
        return lambda job: job.name.startswith(self.prefix)

    def submit(
        self,
        demands: tuple[int, ...],
        samples: float,
        *,
        batch: int = 32,
        type_speed: str = "",
        label: str = "j",
        minutes: int = 10,
    ) -> int:
        script = self.root / f"{label}.sh"
        script.write_text(
            "#!/bin/bash\n"
            f"export HOPS_SPOOL_DIR={self.spool}\n"
            f"exec {PYTHON} {TRAIN_JOB} --samples {samples:g} --batch {batch} "
            f"--type-speed '{type_speed}'\n"
        )
        args = [
            "-J",
            f"{self.prefix}{label}",
            "-o",
            str(self.root / "%j.out"),
            "--open-mode=append",
            "-t",
            str(minutes),
        ]
        job = self.port.submit(
            SubmitRequest(str(script), sbatch_args=args, tag=HopsTag(demands, samples, batch))
        )
        self.submitted.append(job)
        return job

    def rows(self) -> dict[int, JobRow]:
        with self.sessions.begin() as s:
            return {int(r.slurm_job_id or 0): r for r in s.scalars(select(JobRow))}

    def all_terminal(self) -> bool:
        rows = self.rows()
        return all(j in rows and rows[j].state in TERMINAL_STATES for j in self.submitted)

    def events(self, job: int) -> list[dict[str, object]]:
        path = self.spool / f"{job}.events"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def cleanup(self) -> None:
        """Cancel whatever of this test's jobs is still in Slurm."""
        ids = [str(j) for j in self.submitted + self.blockers]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=20, check=False)


def drive(
    step: Callable[[], object], done: Callable[[], bool], deadline_s: float, interval_s: float = 1.0
) -> bool:
    """Call ``step`` every ``interval_s`` until ``done()`` or the deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        step()
        if done():
            return True
        time.sleep(interval_s)
    return done()


def hopsd_process(
    env: LiveEnv,
    faults: Sequence[str] = (),
    log: Path | None = None,
    args: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """A ``hopsd`` subprocess on this test's config, adopting only its jobs.

    ``faults`` are crash options of :mod:`faulty_hopsd` (``--crash-after-intents``,
    ``--crash-after-actions N``); ``args`` more of hopsd's own (``--shadow``).
    """
    out = open(log or env.root / "hopsd.log", "ab")  # noqa: SIM115 - handed to the child
    line = command("--config", str(env.config_path), *args, adopt_prefix=env.prefix, faults=faults)
    return subprocess.Popen(line, stdout=out, stderr=out)


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_metrics(env: LiveEnv) -> int:
    """Have the test's hopsd serve its metrics and status page on a free port; the port."""
    port = free_port()
    text = env.config_path.read_text()
    served = text.replace('[metrics]\naddress = ""', f'[metrics]\naddress = "127.0.0.1:{port}"')
    assert served != text, "the live hops.conf has no empty [metrics] address to set"
    env.config_path.write_text(served)
    return port


def hops_submit(env: LiveEnv, label: str, samples: int, gpus: str) -> int:
    """`hops submit` a training job of ``samples`` on ``gpus``; its id, recorded for cleanup."""
    from typer.testing import CliRunner

    from hops_cli.main import app

    script = env.root / f"{label}.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"#SBATCH -J {env.prefix}{label}\n"
        f"#SBATCH -o {env.root}/%j.out\n"
        "#SBATCH -t 10\n"
        f"export HOPS_SPOOL_DIR={env.spool}\n"
        f"exec {PYTHON} {TRAIN_JOB} --samples {samples} --batch 32\n"
    )
    script.chmod(0o755)
    result = CliRunner().invoke(
        app,
        [
            "submit",
            str(script),
            "--gpus",
            gpus,
            "--samples",
            str(samples),
            "--parsable",
            "--",
            "--open-mode=append",
        ],
    )
    assert result.exit_code == 0, result.output
    job_id = int(result.stdout.strip())
    env.submitted.append(job_id)
    return job_id
