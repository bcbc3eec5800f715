"""Planning with CPython's cyclic garbage collector paused.

One round at 8,192 GPUs allocates millions of short-lived tuples, dicts and
estimates. Reference counting frees them as they go; almost none form cycles.
CPython still starts a cyclic collection every few hundred allocations, and
each older-generation pass walks every object the process holds: the
snapshot, the throughput store, the ledger's records. Measured on a 2-CPU
machine with ``benchmarks/solver_scaling.py --sizes 8192``, those passes were
0.9 s of a 3.5 s round, more than the ILP solver took.

The collector is paused for the length of one decision and restored after it.
The few cycles a round leaves behind are collected by the next automatic pass.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def collector_paused(func: Callable[P, R]) -> Callable[P, R]:
    """Run ``func`` with automatic cyclic collection off; nested calls leave it to the outer one."""

    @functools.wraps(func)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return func(*args, **kwargs)
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            gc.enable()

    return paused
