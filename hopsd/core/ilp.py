"""The prior-weighted assignment ILP (eqs. 11-13), solved with HiGHS.

    maximise   sum_ij value_ij * X_ij
    s.t.       sum_j X_ij <= 1                      one configuration per job
               sum_ij X_ij * gpus_ijt <= S_t        capacity of every node t
               X_ij in {0, 1}

``value_ij`` already folds in the prior weight and the gain normalisation (see
:mod:`hopsd.core.gains`); this module only knows columns, rows and numbers, so it
can be tested on hand-made matrices. The constraint matrix is assembled with
numpy in compressed-column form and handed to HiGHS in one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import chain

import highspy
import numpy as np
import numpy.typing as npt

from hopsd.core.errors import InvalidInputError, SolverError

#: Absolute gap at which HiGHS may stop; tiny because values are normalised to <= ~100.
ABS_GAP = 1e-9


@dataclass(frozen=True)
class AssignmentProblem:
    """Columns of the ILP: which job each belongs to, its value, and the GPUs it takes per node.

    ``usage[c]`` lists ``(node_row, gpus)`` of column ``c``; ``capacity[r]`` is
    the idle GPUs of node row ``r``.
    """

    n_jobs: int
    col_job: Sequence[int]
    value: Sequence[float]
    usage: Sequence[Sequence[tuple[int, int]]]
    capacity: Sequence[int]

    def __post_init__(self) -> None:
        n = len(self.col_job)
        if len(self.value) != n or len(self.usage) != n:
            raise InvalidInputError("ILP columns: job, value and usage lists differ in length")
        if any(c < 0 for c in self.capacity):
            raise InvalidInputError("ILP: negative node capacity")

    @property
    def n_cols(self) -> int:
        return len(self.col_job)


@dataclass(frozen=True)
class Solution:
    """Chosen columns (ascending), the objective they reach, and HiGHS's proven upper bound."""

    chosen: tuple[int, ...]
    objective: float
    optimal: bool
    bound: float


_Csc = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.float64]]


def _matrix(problem: AssignmentProblem) -> _Csc:
    """CSC arrays: each column has its job row, then its node rows (offset by n_jobs)."""
    lengths = np.fromiter((1 + len(u) for u in problem.usage), dtype=np.int32, count=problem.n_cols)
    start = np.zeros(problem.n_cols + 1, dtype=np.int32)
    np.cumsum(lengths, out=start[1:])
    index = np.empty(int(start[-1]), dtype=np.int32)
    value = np.empty(int(start[-1]), dtype=np.float64)
    index[start[:-1]] = np.asarray(problem.col_job, dtype=np.int32)
    value[start[:-1]] = 1.0
    # every other entry is a node row, column after column, in usage order
    nodes = np.ones(int(start[-1]), dtype=bool)
    nodes[start[:-1]] = False
    n_entries = int(start[-1]) - problem.n_cols
    if n_entries:
        # (row, gpus) pairs flattened by an iterator: far cheaper than a list of
        # tuples through np.asarray on models of thousands of columns
        flat = chain.from_iterable(chain.from_iterable(problem.usage))
        pairs = np.fromiter(flat, dtype=np.float64, count=2 * n_entries).reshape(-1, 2)
        index[nodes] = problem.n_jobs + pairs[:, 0].astype(np.int64)
        value[nodes] = pairs[:, 1]
    return start, index, value


def _highs(
    problem: AssignmentProblem,
    mip_gap: float,
    time_limit: float,
    integral: bool = True,
    matrix: _Csc | None = None,
    node_limit: int | None = None,
) -> highspy.Highs:
    start, index, coef = matrix if matrix is not None else _matrix(problem)
    n_rows = problem.n_jobs + len(problem.capacity)
    lp = highspy.HighsLp()
    lp.num_col_ = problem.n_cols
    lp.num_row_ = n_rows
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_ = np.asarray(problem.value, dtype=np.float64)
    lp.col_lower_ = np.zeros(problem.n_cols)
    lp.col_upper_ = np.ones(problem.n_cols)
    lp.row_lower_ = np.full(n_rows, -highspy.kHighsInf)
    lp.row_upper_ = np.concatenate(
        [np.ones(problem.n_jobs), np.asarray(problem.capacity, dtype=np.float64)]
    )
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_ = problem.n_cols
    lp.a_matrix_.num_row_ = n_rows
    lp.a_matrix_.start_ = start
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = coef
    if integral:
        lp.integrality_ = [highspy.HighsVarType.kInteger] * problem.n_cols
    h = highspy.Highs()  # type: ignore[no-untyped-call, unused-ignore]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("presolve", "off")  # costs more than it saves on these sparse models
    # Every solve starts from a feasible plan (the running jobs kept, or nothing),
    # which makes the feasibility-jump heuristic redundant; it was most of the
    # solve time on large class-level models.
    h.setOptionValue("mip_heuristic_run_feasibility_jump", False)
    # The root reduced-cost heuristic re-solves a restricted MIP at the root; on the
    # class-level models of a 512-GPU cluster it took a fifth of the solve time and
    # found, over a whole paper-512 run, plans of the same objective (to 1e-6 on
    # average) as the other heuristics that run anyway.
    h.setOptionValue("mip_heuristic_run_root_reduced_cost", False)
    h.setOptionValue("mip_rel_gap", mip_gap)
    h.setOptionValue("mip_abs_gap", ABS_GAP)
    h.setOptionValue("time_limit", float(time_limit))
    if node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(node_limit))
    status = h.passModel(lp)
    if status == highspy.HighsStatus.kError:
        raise SolverError("HiGHS refused the assignment model")
    return h


def check_feasible(problem: AssignmentProblem, chosen: Sequence[int]) -> bool:
    """Whether a set of columns respects one-per-job and every node's capacity."""
    jobs = [problem.col_job[c] for c in chosen]
    if len(set(jobs)) != len(jobs):
        return False
    used = [0] * len(problem.capacity)
    for c in chosen:
        for row, gpus in problem.usage[c]:
            used[row] += gpus
    return all(u <= cap for u, cap in zip(used, problem.capacity, strict=True))


def solve_assignment(
    problem: AssignmentProblem,
    *,
    mip_gap: float,
    time_limit: float,
    warm_start: Sequence[int] = (),
    node_limit: int | None = None,
) -> Solution:
    """Solve the ILP; ``warm_start`` is a feasible set of columns handed to HiGHS first.

    A warm start that is not feasible is ignored rather than trusted. A time or
    node limit that stops HiGHS with a feasible solution in hand returns that
    solution (``optimal=False``); anything else unusual is a :class:`SolverError`.
    Only the node limit gives the same plan on a slow or busy machine as on a fast one.
    """
    if problem.n_cols == 0:
        return Solution((), 0.0, True, 0.0)
    if problem.n_cols >= ROUNDING_MIN_COLS:
        rounded = rounded_relaxation(problem, time_limit)
        if rounded is not None:
            if rounded.objective >= rounded.bound - mip_gap * abs(rounded.objective) - ABS_GAP:
                return replace(rounded, optimal=True)  # within the gap, as HiGHS's "optimal"
            warm_start = _better_start(problem, warm_start, rounded.chosen)
    h = _highs(problem, mip_gap, time_limit, node_limit=node_limit)
    if warm_start and check_feasible(problem, warm_start):
        start = np.zeros(problem.n_cols)
        start[list(warm_start)] = 1.0
        sol = highspy.HighsSolution()
        sol.col_value = start
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    status = h.getModelStatus()
    optimal = status == highspy.HighsModelStatus.kOptimal
    info = h.getInfo()
    if not optimal and info.primal_solution_status != 2:  # 2 = feasible solution available
        raise SolverError(f"HiGHS ended with {h.modelStatusToString(status)} and no plan")
    x = np.asarray(h.getSolution().col_value)
    chosen = tuple(int(c) for c in np.flatnonzero(x > 0.5))
    if not check_feasible(problem, chosen):
        raise SolverError("HiGHS returned an assignment that breaks a constraint")
    objective = float(np.asarray(problem.value, dtype=np.float64)[list(chosen)].sum())
    bound = float(info.mip_dual_bound)
    return Solution(chosen, objective, optimal, max(bound, objective))


#: Models with at least this many columns first solve their LP relaxation and round it.
#: Their relaxation is nearly integral (one row per job, few resource rows), so the
#: rounded plan is almost always within the gap of the LP bound, which bounds every
#: integer plan; that proves it as the MILP would, for half the solver time at 8192
#: GPUs (the MILP spends as long again at its root after the same LP).
ROUNDING_MIN_COLS = 10_000


def rounded_relaxation(problem: AssignmentProblem, time_limit: float) -> Solution | None:
    """The LP relaxation's optimum, rounded to a feasible plan; None if the LP fails.

    Columns at 1 are kept (together they respect every row, as all usage is
    non-negative); then the columns of jobs the LP split are tried, as the LP
    leaned and heaviest first, each taken while its rows have room.
    ``Solution.bound`` is the LP optimum, an upper bound of every integer plan.
    """
    start, index, coef = _matrix(problem)
    h = _highs(problem, 0.0, time_limit, integral=False, matrix=(start, index, coef))
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    x = np.asarray(h.getSolution().col_value)
    bound = float(h.getInfo().objective_function_value)
    room = np.concatenate([np.ones(problem.n_jobs), np.asarray(problem.capacity, dtype=float)])
    whole = np.flatnonzero(x > 1.0 - 1e-7)
    taken = np.zeros(problem.n_cols, dtype=bool)
    taken[whole] = True
    owner = np.repeat(np.arange(problem.n_cols), np.diff(start))
    mask = taken[owner]
    np.subtract.at(room, index[mask], coef[mask])
    col_job = np.asarray(problem.col_job)
    value = np.asarray(problem.value, dtype=np.float64)
    split = np.setdiff1d(col_job[(x > 1e-7) & (x <= 1.0 - 1e-7)], col_job[whole])
    options = np.flatnonzero(np.isin(col_job, split)).tolist()
    chosen = [int(c) for c in whole]
    for c in sorted(options, key=lambda c: (-x[c], -value[c], c)):
        rows = index[start[c] : start[c + 1]]
        need = coef[start[c] : start[c + 1]]
        if np.all(room[rows] >= need - 1e-9):
            room[rows] -= need
            chosen.append(c)
    chosen.sort()
    if not check_feasible(problem, chosen):
        return None
    objective = float(value[chosen].sum())
    return Solution(tuple(chosen), objective, False, max(bound, objective))


def _better_start(
    problem: AssignmentProblem, warm_start: Sequence[int], rounded: Sequence[int]
) -> Sequence[int]:
    """Whichever feasible start is worth more: the caller's or the rounded relaxation."""
    value = np.asarray(problem.value, dtype=np.float64)
    keep = warm_start and check_feasible(problem, warm_start)
    if keep and float(value[list(warm_start)].sum()) >= float(value[list(rounded)].sum()):
        return warm_start
    return rounded
