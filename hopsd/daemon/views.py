"""The daemon's own view of what Slurm reported in one tick.

Port records are converted into these small frozen values once, in
:mod:`hopsd.daemon.observe`, so reconcile/decide/enact never depend on the
port's field names and unit tests can build observations by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from hopsd.slurm.port import FINISHED_STATES
from hopsd.slurm.tag import HopsTag

PENDING = "PENDING"
RUNNING = "RUNNING"
# Slurm states after which a job holds no GPUs and never runs again: the port's.
FINAL_STATES = FINISHED_STATES
# Transitional states: the job still holds (or is about to hold) its GPUs.
BUSY_STATES = frozenset({RUNNING, "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED"})


@dataclass(frozen=True)
class ObservedJob:
    """One Slurm job as seen this tick.

    ``held`` is true for a pending job with priority 0 (user or admin hold);
    ``nodes`` maps node name to the GPUs the job holds there (empty when pending);
    ``restarts`` is Slurm's restart count, which grows on every requeue;
    ``work_dir`` the job's working directory (its spool when hops.conf names none).
    """

    slurm_id: int
    user: str
    account: str
    state: str
    name: str = ""
    comment: str = ""
    held: bool = False
    reason: str = ""
    partition: str = ""
    nodes: Mapping[str, int] = field(default_factory=dict)
    restarts: int = 0
    submit_time: float = 0.0
    start_time: float = 0.0
    end_time: float = 0.0
    exit_code: int = 0
    tag: HopsTag | None = None
    tag_error: str | None = None
    work_dir: str = ""
    #: Slurm's time limit of the job's runs, seconds (None: unlimited or unknown)
    time_limit_s: float | None = None
    #: The job's ``--cpus-per-gpu`` (0: none): hops sets its CPUs to follow its GPUs.
    cpus_per_gpu: int = 0
    #: The job's QOS: the GPU limits of :mod:`hopsd.daemon.slurm_policy` apply through it.
    qos: str = ""
    #: The nodes Slurm names for the job's run, also once it ended, when Slurm no longer
    #: states its GPUs per node (``nodes`` is then empty).
    ran_on: tuple[str, ...] = ()

    @property
    def claims_hops(self) -> bool:
        """The comment says it is a hops tag (valid or not)."""
        return self.tag is not None or self.tag_error is not None

    @property
    def pending(self) -> bool:
        return self.state == PENDING

    @property
    def busy(self) -> bool:
        return self.state in BUSY_STATES

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def gpus(self) -> int:
        return sum(self.nodes.values())


@dataclass(frozen=True)
class ObservedNode:
    """One node: its typed GPUs, which partitions list it, and whether it is usable."""

    name: str
    gpu_type: str
    gpus: int
    gpus_used: int = 0
    partitions: tuple[str, ...] = ()
    usable: bool = True
    state: str = "idle"


@dataclass(frozen=True)
class Observation:
    """Everything one tick learned from Slurm, with the number of Slurm calls it took."""

    at: float
    jobs: tuple[ObservedJob, ...]
    nodes: tuple[ObservedNode, ...]
    slurm_calls: int = 2

    def job_map(self) -> Mapping[int, ObservedJob]:
        """The jobs by Slurm id, built once per observation: a tick's stages each ask."""
        return self._by_slurm_id

    @cached_property
    def _by_slurm_id(self) -> Mapping[int, ObservedJob]:
        return {j.slurm_id: j for j in self.jobs}  # read-only by its type
