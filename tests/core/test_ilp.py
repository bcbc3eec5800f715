"""Eqs. 11-13: prior weights with bias, Sia-normalised gains, restart discount, the HiGHS ILP."""

from __future__ import annotations

import itertools
import random

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.core.gains import (
    WEIGHT_FLOOR,
    normalised_gains,
    prior_weights,
    priority_bias,
    restart_discount,
    resume_discount,
)
from hopsd.core.ilp import AssignmentProblem, _matrix, check_feasible, solve_assignment
from hopsd.core.settings import Settings


def test_bias_is_zero_when_all_priorities_are_positive() -> None:
    assert priority_bias([0.5, 2.0]) == 0.0


def test_bias_with_zero_or_negative_priorities() -> None:
    assert priority_bias([0.0, 1.0]) == pytest.approx(0.01)
    assert priority_bias([-2.0, 1.0]) == pytest.approx(2.01)


def test_weights_are_biased_powered_and_normalised_to_the_top() -> None:
    assert prior_weights([2.0, 1.0], 1.0) == pytest.approx([1.0, 0.5])
    assert prior_weights([2.0, 1.0], 2.0) == pytest.approx([1.0, 0.25])
    assert prior_weights([2.0, 1.0], 0.0) == pytest.approx([1.0, 1.0])
    # bias |-1| + 0.01 = 1.01: shifted 0.01, 1.01, 4.01
    assert prior_weights([-1.0, 0.0, 3.0], 1.0) == pytest.approx([0.01 / 4.01, 1.01 / 4.01, 1.0])


def test_huge_lambda_neither_overflows_nor_vanishes() -> None:
    weights = prior_weights([1000.0, 999.0, 1.0], 500.0)
    assert weights[0] == 1.0
    assert WEIGHT_FLOOR < weights[1] < 1.0  # (999/1000)^500 = 0.606
    assert weights[2] == WEIGHT_FLOOR


def test_negative_lambda_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        prior_weights([1.0], -1.0)


def test_gains_are_throughput_over_the_slowest_configuration() -> None:
    assert normalised_gains([50.0, 100.0, 150.0]) == pytest.approx([1.0, 2.0, 3.0])
    with pytest.raises(InvalidInputError):
        normalised_gains([0.0, 1.0])


def test_restart_discount_is_the_share_of_the_round_left() -> None:
    assert restart_discount(300.0, 30.0) == pytest.approx(0.9)
    assert restart_discount(300.0, 600.0) == 0.0


def test_a_resume_is_discounted_against_idle_gpus_never_to_nothing() -> None:
    assert resume_discount(300.0, 0.0) == 1.0
    assert resume_discount(300.0, 30.0) == pytest.approx(300.0 / 330.0)
    assert resume_discount(300.0, 300.0) == pytest.approx(0.5)
    assert 0.0 < resume_discount(300.0, 1e9) < resume_discount(300.0, 600.0)


# A gain-matrix example in the spirit of the method's Table 1: two 4-GPU nodes
# (row 0 fast, row 1 slow), three jobs. Throughputs (samples/s):
#   job 0: {fast:4} 400, {slow:4} 200, {fast:2} 220  -> G = 2.0, 1.0, 1.1
#   job 1: {fast:4} 300, {slow:4} 120               -> G = 2.5, 1.0
#   job 2: {fast:2} 100, {slow:2} 60                -> G = 5/3, 1.0
THROUGHPUT = [[400.0, 200.0, 220.0], [300.0, 120.0], [100.0, 60.0]]
USAGE = [[[(0, 4)], [(1, 4)], [(0, 2)]], [[(0, 4)], [(1, 4)]], [[(0, 2)], [(1, 2)]]]


def table_problem(weights: list[float]) -> AssignmentProblem:
    col_job: list[int] = []
    value: list[float] = []
    usage: list[list[tuple[int, int]]] = []
    for job, thr in enumerate(THROUGHPUT):
        for gain, use in zip(normalised_gains(thr), USAGE[job], strict=True):
            col_job.append(job)
            value.append(weights[job] * gain)
            usage.append(use)
    return AssignmentProblem(3, col_job, value, usage, [4, 4])


def test_table_example_lambda_one_serves_priority_first() -> None:
    # priorities 3, 1.8, 1 -> weights 1, 0.6, 1/3; values:
    # job0: 2.0, 1.0, 1.1   job1: 1.5, 0.6   job2: 5/9, 1/3
    # job0 fast:4 + job1 slow:4 = 2.6 beats job0 slow:4 + job1 fast:4 = 2.5,
    # job0 fast:4 + job2 slow:2 = 2.333 and job0 fast:2 + job2 fast:2 + job1 slow:4 = 2.256
    weights = prior_weights([3.0, 1.8, 1.0], 1.0)
    sol = solve_assignment(table_problem(weights), mip_gap=0.0, time_limit=5.0)
    # columns: 0-2 job0, 3-4 job1, 5-6 job2; job0 fast:4 (col 0) + job1 slow:4 (col 4)
    assert sol.chosen == (0, 4)
    assert sol.objective == pytest.approx(2.6)


def test_table_example_lambda_zero_maximises_total_normalised_throughput() -> None:
    # all weights 1: job0 fast:2 + job2 fast:2 + job1 slow:4 = 1.1 + 5/3 + 1 = 3.7667
    # beats job0 fast:4 + job1 slow:4 = 3.0 and job1 fast:4 + job0 slow:4 = 3.5
    sol = solve_assignment(table_problem([1.0, 1.0, 1.0]), mip_gap=0.0, time_limit=5.0)
    assert sol.chosen == (2, 4, 5)
    assert sol.objective == pytest.approx(1.1 + 5.0 / 3.0 + 1.0)


def brute_force(problem: AssignmentProblem) -> float:
    per_job: list[list[int | None]] = [[None] for _ in range(problem.n_jobs)]
    for c, j in enumerate(problem.col_job):
        per_job[j].append(c)
    best = 0.0
    for pick in itertools.product(*per_job):
        chosen = [c for c in pick if c is not None]
        if check_feasible(problem, chosen):
            best = max(best, sum(problem.value[c] for c in chosen))
    return best


@pytest.mark.parametrize("weights", [[1.0, 1.0, 1.0], [1.0, 0.5, 0.25], [0.2, 1.0, 0.7]])
def test_ilp_matches_brute_force(weights: list[float]) -> None:
    problem = table_problem(weights)
    sol = solve_assignment(problem, mip_gap=0.0, time_limit=5.0)
    assert sol.optimal
    assert sol.objective == pytest.approx(brute_force(problem))


def test_infeasible_warm_start_is_ignored_and_empty_problem_is_trivial() -> None:
    problem = table_problem([1.0, 1.0, 1.0])
    sol = solve_assignment(problem, mip_gap=0.0, time_limit=5.0, warm_start=[0, 3])
    assert sol.objective == pytest.approx(brute_force(problem))
    empty = AssignmentProblem(0, [], [], [], [4])
    assert solve_assignment(empty, mip_gap=0.0, time_limit=1.0).chosen == ()


def test_malformed_problem_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        AssignmentProblem(1, [0], [1.0, 2.0], [[(0, 1)]], [1])
    with pytest.raises(InvalidInputError):
        AssignmentProblem(1, [0], [1.0], [[(0, 1)]], [-1])


def test_rounded_relaxation_keeps_whole_columns_and_fills_split_jobs() -> None:
    # One resource of 3. a: 2 GPUs worth 2.2. b: 2 GPUs worth 2 or 1 GPU worth 0.8.
    # LP: a whole, b half on its 2-GPU column (bound 3.2). Rounded: a, then b's 1-GPU column.
    from hopsd.core.ilp import rounded_relaxation

    problem = AssignmentProblem(
        n_jobs=2,
        col_job=[0, 1, 1],
        value=[2.2, 2.0, 0.8],
        usage=[[(0, 2)], [(0, 2)], [(0, 1)]],
        capacity=[3],
    )
    rounded = rounded_relaxation(problem, 10.0)
    assert rounded is not None
    assert rounded.chosen == (0, 2)
    assert rounded.objective == pytest.approx(3.0)
    assert rounded.bound == pytest.approx(3.2)


def test_large_models_proven_by_the_rounded_relaxation_stay_within_the_gap() -> None:
    # 2500 jobs x 4 columns over 12 resources: above the size where the relaxation is
    # rounded first. Its plan must be feasible, within 1 % of the exact optimum, and its
    # bound must bound that optimum.
    import random

    from hopsd.core.ilp import ROUNDING_MIN_COLS

    rng = random.Random(5)
    n_jobs, per_job, n_rows = 2500, 4, 12
    usage = [[(rng.randrange(n_rows), rng.choice((1, 2, 4, 8)))] for _ in range(n_jobs * per_job)]
    problem = AssignmentProblem(
        n_jobs=n_jobs,
        col_job=[c // per_job for c in range(n_jobs * per_job)],
        value=[rng.uniform(0.1, 2.0) * u[0][1] ** 0.5 for u in usage],
        usage=usage,
        capacity=[rng.randint(200, 600) for _ in range(n_rows)],
    )
    assert problem.n_cols >= ROUNDING_MIN_COLS
    fast = solve_assignment(problem, mip_gap=0.01, time_limit=60.0)
    assert check_feasible(problem, fast.chosen)
    # The reference is HiGHS's own MILP (below the rounding path): its dual bound is
    # at least the optimum, its incumbent at most.
    from hopsd.core.ilp import _highs

    h = _highs(problem, 1e-4, 60.0)
    h.run()
    info = h.getInfo()
    assert fast.objective >= 0.99 * info.mip_dual_bound
    assert fast.bound >= info.objective_function_value - 1e-6


def _branching_problem() -> AssignmentProblem:
    """30 jobs, three options each on three rows: HiGHS needs several nodes to prove it."""
    rng = random.Random(17)
    col_job: list[int] = []
    value: list[float] = []
    usage: list[list[tuple[int, int]]] = []
    for j in range(30):
        for _ in range(3):
            col_job.append(j)
            value.append(rng.uniform(1, 10))
            usage.append([(rng.randrange(3), rng.randint(1, 7))])
    return AssignmentProblem(30, col_job, value, usage, [23, 29, 31])


def test_node_limit_stops_the_search_with_a_feasible_plan_the_same_every_time() -> None:
    problem = _branching_problem()
    proven = solve_assignment(problem, mip_gap=0.0, time_limit=60.0)
    assert proven.optimal
    cut = [solve_assignment(problem, mip_gap=0.0, time_limit=60.0, node_limit=1) for _ in range(3)]
    assert not cut[0].optimal  # stopped by the node limit, not by proof
    assert check_feasible(problem, cut[0].chosen)
    assert cut[0].bound >= proven.objective - 1e-9 >= cut[0].objective - 1e-9
    assert all(c.chosen == cut[0].chosen for c in cut)  # work, not seconds: no run differs


def test_node_limit_must_be_positive() -> None:
    with pytest.raises(InvalidInputError, match="node_limit"):
        Settings(node_limit=0)


def test_the_restart_price_of_a_job_that_never_reported_is_its_run_so_far() -> None:
    from hopsd.core.gains import hears_notice, restart_price_s

    assert not hears_notice(None) and hears_notice(1.5)
    # ran 400 s before and 250 s now without a word from a probe: a requeue loses the run
    assert restart_price_s(None, None, 120.0, 1, 250.0, 30.0) == 250.0
    # never restarted yet: nothing learned, the prior applies (None)
    assert restart_price_s(None, None, 120.0, 0, 250.0, 30.0) is None
    # its probe reported: start-up plus checkpoint, whatever it ran
    assert restart_price_s(4.0, 6.0, 120.0, 2, 250.0, 30.0) == 10.0
    # reported its start, never a checkpoint: it waits the whole grace
    assert restart_price_s(None, 6.0, 120.0, 1, 250.0, 30.0) == 126.0


def test_a_restart_measured_whole_prices_moves_before_the_probes_parts() -> None:
    from hopsd.core.gains import restart_price_s

    # restarted before: its own whole restart (requeue, launch, start-up) wins over the parts
    assert restart_price_s(4.0, 6.0, 120.0, 2, 250.0, 30.0, whole_s=17.0, model_s=9.0) == 17.0
    # never restarted: its model's whole restart, not the prior
    assert restart_price_s(None, None, 120.0, 0, 0.0, 30.0, whole_s=None, model_s=9.0) == 9.0
    # restarted but not measured whole: the model's before the parts
    assert restart_price_s(4.0, 6.0, 120.0, 1, 250.0, 30.0, model_s=9.0) == 9.0
    # a job without the probe still loses its run so far, whatever its model costs
    assert restart_price_s(None, None, 120.0, 1, 250.0, 30.0, model_s=9.0) == 250.0


def test_constraint_matrix_lists_each_columns_job_row_then_its_node_rows() -> None:
    """Compressed columns: the job row (value 1), then every (node row + n_jobs, GPUs)
    in usage order; a column using no node has its job row alone."""
    problem = AssignmentProblem(
        n_jobs=2,
        col_job=[0, 1, 1],
        value=[1.0, 2.0, 3.0],
        usage=[[(0, 4)], [], [(1, 2), (0, 6)]],
        capacity=[8, 8],
    )
    start, index, value = _matrix(problem)
    assert start.tolist() == [0, 2, 3, 6]
    assert index.tolist() == [0, 2, 1, 1, 3, 2]
    assert value.tolist() == [1.0, 4.0, 1.0, 1.0, 2.0, 6.0]
    only_jobs = AssignmentProblem(2, [0, 1], [1.0, 1.0], [[], []], [4])
    assert _matrix(only_jobs)[1].tolist() == [0, 1]
