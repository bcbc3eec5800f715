"""SciPy's LP solver for the sia and gavel baselines, loaded when a baseline first plans.

SciPy is an optional extra (``hops-scheduler[sim]``): the slim install on a
login node runs hops's own planner, which needs HiGHS only. Each baseline asks
for SciPy when it is built, so a missing extra is one clear error before the
first round, never a traceback inside one.
"""

from __future__ import annotations

from types import ModuleType

from hopsd.core.errors import missing_extra


def scipy_lp(policy: str) -> tuple[ModuleType, ModuleType]:
    """``(scipy.optimize, scipy.sparse)``, or the error naming the extra that installs them."""
    try:
        from scipy import optimize, sparse
    except ImportError as exc:
        raise missing_extra(f"the {policy} policy", "scipy", "sim") from exc
    return optimize, sparse
