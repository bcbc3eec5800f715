"""The jobs a forecast expects to be submitted: the next window like the last one.

A job's START and ETA move most when jobs arrive after the forecast: the
latency-ratio queue serves a new short job first, so it delays the waiting
jobs or preempts running ones. A forecast that assumes no arrival is biased
early for every job but the last. The ``recent`` model assumes the coming
``window_s`` sees what the last one saw: the jobs submitted in the last
``window_s`` (their demands, their work, their users) are submitted again, in
the same order, evenly spaced over the next ``window_s`` (the mean rate of the
window, without its bursts). Even spacing and replayed shapes keep the forecast
deterministic and cheap (no draws to average); ``max_jobs`` bounds its cost.

A replayed job's work is what its original took, in GPU-seconds normalised by
the types' speeds (what hopsd charges as service): the work a job that ended
did, or the work a live job's estimate foresees. It runs at
``reference_throughput`` samples/s per unit of GPU speed on every type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hopsd.config_checks import ARRIVAL_MODES as MODES
from hopsd.core.errors import InvalidInputError


@dataclass(frozen=True)
class ArrivalModel:
    """How a forecast foresees arrivals (``[forecast]`` in hops.conf)."""

    mode: str = "none"
    window_s: float = 3600.0
    max_jobs: int = 16

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidInputError(f"arrivals: {'|'.join(MODES)}, not {self.mode!r}")
        if not self.window_s > 0 or self.max_jobs < 0:
            raise InvalidInputError("arrivals: window_s > 0 and max_jobs >= 0")


@dataclass(frozen=True)
class PastArrival:
    """A job submitted in the window: when, and its shape (``work_s``: the normalised
    GPU-seconds it took, or is foreseen to take)."""

    submit_time: float
    demands: tuple[int, ...]
    work_s: float
    user: str = ""
    batch_size: int = 32
    params: float = 25e6


@dataclass(frozen=True)
class Expected:
    """A job the forecast expects: ``shape`` submitted ``after_s`` seconds from now."""

    after_s: float
    shape: PastArrival


def in_window(past: Sequence[PastArrival], now: float, window_s: float) -> list[PastArrival]:
    """The arrivals of the last ``window_s`` seconds with work to replay, oldest first."""
    chosen = [p for p in past if now - window_s <= p.submit_time <= now and p.work_s > 0]
    return sorted(chosen, key=lambda p: p.submit_time)


def expected(
    model: ArrivalModel, past: Sequence[PastArrival], now: float, since: float | None = None
) -> list[Expected]:
    """The jobs expected in the next window (nothing for mode ``none``): the window's
    arrivals replayed in order at its mean rate, the first one gap from now.

    ``since`` is when arrivals began to be recorded (the ledger's first job): a
    window that reaches back before it was seen only in part, and its arrivals
    came at their rate over that part, not over the whole window. Spread over
    the whole window, the first minutes of a fresh cluster (or a burst right
    after it) would foresee almost no arrival.
    """
    if model.mode == "none" or model.max_jobs == 0:
        return []
    span = model.window_s if since is None else min(model.window_s, max(now - since, 0.0))
    seen = in_window(past, now, model.window_s)
    if not seen:
        return []
    gap = span / len(seen)
    return [Expected((i + 1) * gap, shape) for i, shape in enumerate(seen[: model.max_jobs])]
