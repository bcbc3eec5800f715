"""Ground truth of the simulated cluster: how fast a job *really* runs in a configuration.

The scheduler never reads this module's answers directly; it only sees what the
estimator is told (noisy profiles, noisy measurements). The truth follows the
same per-iteration physics the method assumes (eqs. 1-5), plus two effects the
theory layer cannot know up front:

* a hidden per-server data-loading factor (older CPU, slower disk): it scales the
  data time T_d of every job on that server, so data-bound jobs (ResNet50 on
  ImageNet) slow down a lot and compute-bound ones (DistilBERT) barely;
* a hidden per-model communication inefficiency (``comm_scale``) that stretches
  T_c beyond the ideal ring all-reduce.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hopsd.core.errors import InvalidInputError
from hopsd.core.gains import learned_restart_s
from hopsd.core.model import Cluster, Configuration, GpuType
from hopsd.core.throughput import Mixture, PhaseProfile

#: Split of one iteration's compute time into forward, backward and update.
FORWARD_SHARE = 0.3
BACKWARD_SHARE = 0.6
UPDATE_SHARE = 0.1
#: Non-overlapped share of communication, as in eqs. 1-2.
COMM_OVERLAP = 0.2


@dataclass(frozen=True, slots=True)
class LearnedRestart:
    """What hopsd learned of a live job's restarts (measured whole, its model's, or its
    probe's startup and checkpoint) and the notice grace: hopsd's price of moving it
    follows from them and its restart count (:func:`hopsd.core.gains.learned_restart_s`)."""

    startup_s: float | None
    checkpoint_s: float | None
    grace_s: float
    #: the job's restart measured whole, and its model's when it was adopted
    whole_s: float | None = None
    model_s: float | None = None

    def price(self, restarts: int) -> float | None:
        return learned_restart_s(
            self.checkpoint_s, self.startup_s, self.grace_s, restarts,
            whole_s=self.whole_s, model_s=self.model_s,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One trainable model of the workload mix.

    ``throughput`` is the compute-bound per-GPU samples/s on one GPU of each type
    (a fast host, no data stall); ``data_ms_per_sample`` the mean data-loading
    time per sample on a host of factor 1.0; ``p_hit`` the share of iterations
    served from the page cache (a miss costs ``miss_ratio`` times a hit).
    ``restore_s``, when set, is what a restart of this model really costs
    (checkpoint restore; Sia measured 15-250 s per model) instead of the
    common restart penalty; ``launch_s`` what its first start costs before it
    trains (a replayed job's measured launch; 0 in generated workloads).
    With ``priced_as`` the planner prices this model's moves at what hopsd
    learns from its probe (:class:`LearnedRestart`) instead of its true cost,
    as hopsd priced a live job's. ``profile_s``, when set, is how long a job of
    this model is profiled, all its runs (a replayed job's own phase, measured
    live: a slow start-up is paid in every run), shared among the types it is
    profiled on, instead of the world's ``profile_s`` shared among all types.
    ``max_gpus`` caps, per GPU type, the GPUs one job
    of the model can use there (0: it does not fit one GPU of the type, and
    the type needs no throughput); every policy is told (``Job.max_gpus``).
    ``measured_throughput`` holds, per GPU type, what a source measured a job
    of the model doing on 2 or more GPUs of the type (total samples/s on hosts
    of factor 1.0), keyed by placement (:func:`measured_key`): ``"4"`` whatever
    the placement, ``"4/2"`` on two servers, ``"3+1"`` three GPUs on one server
    and one on another. The truth runs a configuration at the most specific
    measurement that matches it and derives the others from ``params`` and
    ``comm_scale``. Only the truth reads it; the scheduler learns it by
    measuring, as it learns everything else of a job's scaling.
    """

    name: str
    params: float
    batch_size: int
    throughput: Mapping[str, float]
    data_ms_per_sample: float = 0.0
    p_hit: float = 0.8
    miss_ratio: float = 3.0
    pattern: int = 1
    comm_scale: float = 1.15
    dataset: str = ""
    restore_s: float | None = None
    launch_s: float = 0.0
    priced_as: LearnedRestart | None = None
    # whether a new job of the model goes through profiling (where the world profiles):
    # a replayed job hopsd did not profile (its model was known) is planned at once
    profiled: bool = True
    # whether hops knows the model's phase times once a job of it is queued without
    # profiling runs (the theory layer): a generated workload's model is known at once;
    # a replayed job of a window hopsd ran without profiling is not (hopsd planned it
    # from the type table until it measured the job running)
    phases_known: bool = True
    profile_s: float | None = None
    max_gpus: Mapping[str, int] = field(default_factory=dict)
    measured_throughput: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.params < 0 or self.batch_size <= 0:
            raise InvalidInputError(f"model {self.name!r}: params >= 0 and batch_size > 0")
        if not self.throughput or any(v <= 0 for v in self.throughput.values()):
            raise InvalidInputError(f"model {self.name!r}: throughputs must be > 0")
        if self.data_ms_per_sample < 0 or not 0 <= self.p_hit <= 1 or self.miss_ratio < 1:
            raise InvalidInputError(f"model {self.name!r}: bad data-loading parameters")
        if self.pattern not in (1, 2) or self.comm_scale <= 0:
            raise InvalidInputError(f"model {self.name!r}: pattern 1|2 and comm_scale > 0")
        if self.restore_s is not None and self.restore_s < 0:
            raise InvalidInputError(f"model {self.name!r}: restore_s must be >= 0")
        if self.profile_s is not None and self.profile_s < 0:
            raise InvalidInputError(f"model {self.name!r}: profile_s must be >= 0")
        if any(limit < 0 for limit in self.max_gpus.values()):
            raise InvalidInputError(f"model {self.name!r}: max_gpus must be >= 0")
        for gpu_type, table in self.measured_throughput.items():
            where = f"model {self.name!r}: measured_throughput on {gpu_type!r}"
            for key, rate in table.items():
                try:
                    canonical = measured_key(key)
                except InvalidInputError as exc:
                    raise InvalidInputError(f"{where}: {exc}") from None
                if canonical != key or rate <= 0:
                    raise InvalidInputError(f"{where}: write {canonical!r}, a rate > 0")

    def measured(self, gpu_type: str, *per_server: int) -> float | None:
        """Total samples/s a source measured with these GPUs on each server of the type:
        of exactly that placement, else of as many GPUs on as many servers, else of as
        many GPUs whatever the placement; None when nobody measured it."""
        table = self.measured_throughput.get(gpu_type)
        if not table:
            return None
        gpus, servers = sum(per_server), len(per_server)
        shape = "+".join(str(g) for g in sorted(per_server, reverse=True))
        for key in (shape if servers > 1 else "", f"{gpus}/{servers}", str(gpus)):
            if key in table:
                return table[key]
        return None

    def limits(self) -> tuple[tuple[str, int], ...]:
        """``max_gpus`` as the planner's ``Job.max_gpus`` (sorted by type)."""
        return tuple(sorted(self.max_gpus.items()))

    def runs_on(self, gpu_type: str) -> bool:
        """Whether one GPU of the type holds the model."""
        return self.max_gpus.get(gpu_type, 1) > 0

    def compute_time(self, gpu_type: str, batch_size: int | None = None) -> float:
        """Seconds of pure compute per iteration on one GPU of ``gpu_type``.

        ``batch_size`` is the job's per-GPU batch (a trace may set it per job);
        compute and data time scale with it, the all-reduce volume does not.
        """
        thr = self.throughput.get(gpu_type)
        if thr is None:
            raise InvalidInputError(f"model {self.name!r} has no throughput for {gpu_type!r}")
        return (batch_size or self.batch_size) / thr

    def data_mixture(self, data_factor: float, batch_size: int | None = None) -> Mixture:
        """T_d as a hit/miss mixture whose mean is ``data_ms * batch * factor``."""
        batch = batch_size or self.batch_size
        mean = self.data_ms_per_sample / 1000.0 * batch * data_factor
        hit = mean / (self.p_hit + (1.0 - self.p_hit) * self.miss_ratio)
        return Mixture(self.p_hit, hit, 0.1 * hit, hit * self.miss_ratio, 0.1 * hit)

    def profile(
        self, gpu_type: str, data_factor: float, batch_size: int | None = None
    ) -> PhaseProfile:
        """Basic per-iteration times of this model on a host with ``data_factor``."""
        c = self.compute_time(gpu_type, batch_size)
        return PhaseProfile(
            t_f=FORWARD_SHARE * c,
            t_b=BACKWARD_SHARE * c,
            t_u=UPDATE_SHARE * c,
            pattern=self.pattern,
            data=self.data_mixture(data_factor, batch_size),
        )


def measured_key(key: str) -> str:
    """The canonical spelling of a placement a source measured, checked.

    ``"N"``: N GPUs whatever the placement; ``"N/K"``: N GPUs on K servers;
    ``"A+B+..."``: A GPUs on one server, B on another... (largest first). One
    GPU is the model's ``throughput``, so every key counts 2 GPUs or more.
    """
    fields = key.split("+") if "+" in key else key.split("/")
    if not all(f.isdigit() and int(f) > 0 for f in fields) or (len(fields) > 2 and "/" in key):
        raise InvalidInputError(f"{key!r} is not N, N/servers or A+B+... GPUs")
    counts = [int(f) for f in fields]
    if "+" in key:
        canonical = "+".join(str(c) for c in sorted(counts, reverse=True))
        gpus = sum(counts)
    else:
        canonical = "/".join(str(c) for c in counts)
        gpus = counts[0]
        if len(counts) == 2 and counts[1] > gpus:
            raise InvalidInputError(f"{key!r}: more servers than GPUs")
    if gpus < 2:
        raise InvalidInputError(f"{key!r}: measured placements count 2 GPUs or more")
    return canonical


def expected_iteration(
    profile: PhaseProfile, comm_s: float, overlap: float = COMM_OVERLAP
) -> float:
    """E[T_iter] (eqs. 1-2) over the hit/miss mixture of the data time."""

    def branch(t_d: float) -> float:
        sync = max(profile.t_b + overlap * comm_s, comm_s) + profile.t_u
        if profile.pattern == 1:
            return max(t_d, sync) + profile.t_f
        return t_d + sync + profile.t_f

    mix = profile.data
    return mix.p_hit * branch(mix.mu_hit) + mix.p_miss * branch(mix.mu_miss)


def comm_time(params: float, n_gpus: int, n_nodes: int, gpu: GpuType) -> float:
    """Ideal T_c of eq. 3 (ring all-reduce inside a node, the network across nodes)."""
    if n_nodes > 1:
        return params / gpu.b_net
    return params / gpu.b_link * (n_gpus - 1) / n_gpus


@dataclass
class GroundTruth:
    """True throughput of every (model, configuration) on one simulated cluster.

    ``data_factors`` holds the hidden per-node data-loading factor (1.0 when a
    node is not listed). ``batch_size`` (the job's per-GPU batch, None for the
    model's) enters every answer: a trace's per-job batch changes the compute and
    data time per iteration but not the all-reduce, so it changes throughput.
    Answers are memoised: the engine asks the same questions every round.
    """

    cluster: Cluster
    models: Mapping[str, ModelSpec]
    data_factors: Mapping[str, float] = field(default_factory=dict)
    _memo: dict[tuple[str, int, Configuration], tuple[float, tuple[float, ...]]] = field(
        default_factory=dict
    )

    def __post_init__(self) -> None:
        self._nodes = self.cluster.node_map()
        for name, model in self.models.items():
            missing = {t for t in self.cluster.gpu_types if model.runs_on(t)} - set(
                model.throughput
            )
            if missing:
                raise InvalidInputError(
                    f"model {name!r} has no throughput for GPU type(s) {sorted(missing)}"
                )

    def model(self, name: str) -> ModelSpec:
        found = self.models.get(name)
        if found is None:
            raise InvalidInputError(f"unknown model {name!r}; known: {sorted(self.models)}")
        return found

    def factor(self, node_id: str) -> float:
        return self.data_factors.get(node_id, 1.0)

    def node_rates(
        self, model: str, config: Configuration, batch_size: int | None = None
    ) -> tuple[float, ...]:
        """Per-GPU samples/s each node of ``config`` could sustain on its own pace."""
        return self._lookup(model, config, batch_size)[1]

    def throughput(self, model: str, config: Configuration, batch_size: int | None = None) -> float:
        """Total samples/s of the configuration: the slowest node sets the pace."""
        return self._lookup(model, config, batch_size)[0]

    def single_gpu(
        self,
        model: str,
        gpu_type: str,
        data_factor: float = 1.0,
        batch_size: int | None = None,
    ) -> float:
        """Per-GPU samples/s on one GPU of a type, on a host of the given factor."""
        known = self._known_single_gpu(model, gpu_type)
        if known is not None:
            return known
        return _one_gpu(self.model(model), gpu_type, data_factor, batch_size)

    def _lookup(
        self, model: str, config: Configuration, batch_size: int | None
    ) -> tuple[float, tuple[float, ...]]:
        key = (model, batch_size or 0, config)
        found = self._memo.get(key)
        if found is None:
            found = self._compute(model, config, batch_size)
            self._memo[key] = found
        return found

    def _known_rates(self, model: str, config: Configuration) -> tuple[float, ...] | None:
        """Per-node rates a subclass knows better than the model's theory (None: it does not)."""
        return None

    def _known_single_gpu(self, model: str, gpu_type: str) -> float | None:
        """A single-GPU rate a subclass knows better than the model's theory (None: it does not)."""
        return None

    def _compute(
        self, model: str, config: Configuration, batch_size: int | None
    ) -> tuple[float, tuple[float, ...]]:
        known = self._known_rates(model, config)
        if known is not None:
            return min(known) * config.total_gpus, known
        spec = self.model(model)
        batch = batch_size or spec.batch_size
        gpu = self.cluster.gpu_types[config.gpu_type]
        limit = spec.max_gpus.get(config.gpu_type)
        if limit is not None and config.total_gpus > limit:
            raise InvalidInputError(
                f"model {model!r} cannot run on {config.total_gpus} GPUs of "
                f"{config.gpu_type!r} (at most {limit})"
            )
        for node_id, _ in config.parts:
            if self._nodes[node_id].gpu_type != config.gpu_type:
                raise InvalidInputError(f"node {node_id!r} is not of type {config.gpu_type!r}")
        measured = spec.measured(config.gpu_type, *(gpus for _, gpus in config.parts))
        if measured is not None:
            rates = self._measured_rates(spec, config, measured, batch)
        else:
            t_c = spec.comm_scale * comm_time(spec.params, config.total_gpus, config.n_nodes, gpu)
            rates = tuple(
                batch
                / expected_iteration(spec.profile(config.gpu_type, self.factor(node), batch), t_c)
                for node, _ in config.parts
            )
        return min(rates) * config.total_gpus, rates

    def _measured_rates(
        self, spec: ModelSpec, config: Configuration, measured: float, batch: int
    ) -> tuple[float, ...]:
        """Per-GPU pace of each node in a configuration whose size a source measured.

        The measurement holds at the model's batch on hosts of factor 1.0; a
        slower host, or a job's own batch, changes it as much as it changes one
        GPU's pace (a source that measured scaling measured no host factors).
        """
        per_gpu = measured / config.total_gpus
        nominal = _one_gpu(spec, config.gpu_type, 1.0, spec.batch_size)
        return tuple(
            per_gpu * _one_gpu(spec, config.gpu_type, self.factor(node), batch) / nominal
            for node, _ in config.parts
        )


def _one_gpu(spec: ModelSpec, gpu_type: str, data_factor: float, batch_size: int | None) -> float:
    """Samples/s of the model on one GPU of a type, on a host of the given factor."""
    batch = batch_size or spec.batch_size
    return batch / expected_iteration(spec.profile(gpu_type, data_factor, batch), 0.0)
