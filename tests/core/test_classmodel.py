"""The class-level model: interchangeable nodes collapse into classes, nodes are chosen after."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hopsd.core.candidates import JobOptions, Member
from hopsd.core.classmodel import ClassColumn, NodeClass, node_classes, place
from hopsd.core.configgen import TypeLayout
from hopsd.core.model import Cluster, Configuration, GpuType, Job, Node
from hopsd.core.rounds import PlannerOptions, plan_round_with
from hopsd.core.settings import Settings
from hopsd.core.snapshot import Snapshot

CLASSES = PlannerOptions(per_group=2, class_model_min_nodes=1)
EXACT = PlannerOptions(exact=True)
BASE = Settings(priority="las", mip_gap=0.0, time_limit_s=10.0)


def cluster(n: int, gpus: int = 8) -> Cluster:
    return Cluster.build([GpuType("t")], [Node(f"n{i}", "t", gpus) for i in range(n)])


def test_nodes_group_by_idle_and_settled_gpus() -> None:
    c = Cluster.build(
        [GpuType("t"), GpuType("u")],
        [Node("a", "t", 8), Node("b", "t", 8), Node("c", "t", 8), Node("d", "u", 8)],
    )
    free = {"a": 8, "b": 4, "c": 8, "d": 8}
    settled = {"a": 8, "b": 4, "c": 2, "d": 8}
    layouts = [TypeLayout(c, t, free, settled) for t in ("t", "u")]
    classes, of = node_classes(layouts)
    assert [(k.gpu_type, k.capacity, k.members) for k in classes] == [
        ("t", 8, ("a",)),
        ("t", 4, ("b",)),
        ("t", 8, ("c",)),  # same idle as a, but its running jobs would keep 6 GPUs
        ("u", 8, ("d",)),
    ]
    assert of == {"a": 0, "b": 1, "c": 2, "d": 3}


def test_packing_rows_stop_three_five_gpu_jobs_on_two_eight_gpu_nodes() -> None:
    # class capacity 16 >= 15, but at most (2 - 1) * 2 = 2 pieces larger than 8 / 2 fit
    jobs = tuple(Job(f"j{i}", (5,), 1e6, attained_service=float(i)) for i in range(3))
    snap = Snapshot(now=0.0, cluster=cluster(2), jobs=jobs)
    plan = plan_round_with(snap, replace(BASE, max_plans=1), CLASSES)
    assert sorted(a.job_id for a in plan.start) == ["j0", "j1"]
    assert sorted(plan.gpus_used().values()) == [5, 5]
    # a fragment plan then splits the third job over the two 3-GPU leftovers
    plan = plan_round_with(snap, BASE, CLASSES)
    split = [a.config.as_dict() for a in plan.start if a.job_id == "j2"]
    assert split == [{"n0": 3, "n1": 2}]


def test_pieces_are_placed_best_fit_largest_first() -> None:
    # 6 + 2 fill one node, 4 + 4 the other: best fit puts each piece on the fullest node
    jobs = tuple(Job(f"j{i}", (d,), 1e6, submit_time=float(i)) for i, d in enumerate((2, 4, 6, 4)))
    plan = plan_round_with(Snapshot(now=0.0, cluster=cluster(2), jobs=jobs), BASE, CLASSES)
    assert len(plan.start) == 4
    assert plan.gpus_used() == {"n0": 8, "n1": 8}
    by_node: dict[str, list[int]] = {}
    for a in plan.start:
        ((node_id, gpus),) = a.config.parts
        by_node.setdefault(node_id, []).append(gpus)
    assert sorted(sorted(v) for v in by_node.values()) == [[2, 6], [4, 4]]


def test_running_job_is_kept_on_its_exact_node() -> None:
    current = Configuration.of("t", {"n2": 4})
    r = Job("r", (4,), 1e6, current=current, samples_done=1.0)
    q = Job("q", (8,), 1e6, attained_service=5.0)
    plan = plan_round_with(Snapshot(now=0.0, cluster=cluster(3), jobs=(r, q)), BASE, CLASSES)
    assert [(a.job_id, a.config) for a in plan.keep] == [("r", current)]
    assert [a.job_id for a in plan.start] == ["q"]
    assert plan.start[0].config.node_ids != ("n2",)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    sizes = draw(st.lists(st.sampled_from((4, 8)), min_size=1, max_size=4))
    c = Cluster.build([GpuType("t")], [Node(f"n{i}", "t", s) for i, s in enumerate(sizes)])
    free = {n.id: n.gpus for n in c.nodes}
    jobs = []
    for j in range(draw(st.integers(1, 4))):
        demands = tuple(sorted(draw(st.sets(st.sampled_from((1, 2, 3, 4, 6, 8)), min_size=1))))
        if demands[0] > c.total_gpus:
            demands = (1,)
        current = None
        if draw(st.booleans()):
            spot = next((n for n in c.nodes if free[n.id] >= demands[0]), None)
            if spot is not None:
                free[spot.id] -= demands[0]
                current = Configuration.of("t", {spot.id: demands[0]})
        jobs.append(
            Job(
                f"j{j}",
                demands,
                1e6,
                attained_service=float(draw(st.integers(0, 3))),
                current=current,
                samples_done=1.0 if current else 0.0,
            )
        )
    return Snapshot(now=0.0, cluster=c, jobs=tuple(jobs))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), st.sampled_from((0.0, 1.0)))
def test_class_model_bounds_the_exact_optimum_and_plans_stay_valid(
    snap: Snapshot, lam: float
) -> None:
    s = replace(BASE, lam=lam, max_plans=1)
    fast = plan_round_with(snap, s, CLASSES)
    exact = plan_round_with(snap, s, EXACT)
    bound = float(fast.notes[0].rsplit("bound=", 1)[1])
    assert bound >= exact.objective - 1e-6 * max(1.0, exact.objective)
    for node_id, used in fast.gpus_used().items():
        assert used <= snap.capacity_of(node_id)
    jobs = {j.id: j for j in snap.jobs}
    for job_id, cfg in fast.placements().items():
        assert cfg.total_gpus in jobs[job_id].demands
    running = {j.id for j in snap.running}
    assert {a.job_id for a in fast.keep + fast.move} | set(fast.preempt) == running


def _option(index: int, job: Job, keep_gain: float | None) -> JobOptions:
    return JobOptions(index, Member(job, 1.0), (), (), (), keep_gain, frozenset(), 1.0)


def test_running_job_whose_pieces_find_no_node_stays_where_it_is() -> None:
    # One class of two 8-GPU nodes. q (8) lands on n0, q2 (6) on n1, leaving n1 two GPUs:
    # r's chosen 4-GPU piece fits nowhere, but its current 2 GPUs on n1 are still free.
    cls = [NodeClass("t", 8, ("n0", "n1"))]
    current = Configuration.of("t", {"n1": 2})
    r = Job("r", (2, 4), 1e6, current=current, samples_done=1.0)
    options = [
        _option(0, Job("q", (8,), 1e6), None),
        _option(1, Job("q2", (6,), 1e6), None),
        _option(2, r, 1.0),
    ]
    chosen = [ClassColumn(o, 1.0, "t", ((0, g),), None, False) for o, g in ((0, 8), (1, 6), (2, 4))]
    placed = place(chosen, cls, {"n0": 8, "n1": 8}, options)
    assert placed[0][0].as_dict() == {"n0": 8}
    assert placed[1][0].as_dict() == {"n1": 6}
    assert placed[2] == (current, True)
    # a queued job, or a running one whose old GPUs are gone, is still left out
    options[2] = _option(2, replace(r, current=Configuration.of("t", {"n1": 4})), 1.0)
    assert 2 not in place(chosen, cls, {"n0": 8, "n1": 8}, options)
    options[2] = _option(2, replace(r, current=None, samples_done=0.0), None)
    assert 2 not in place(chosen, cls, {"n0": 8, "n1": 8}, options)


def test_small_pieces_of_distributed_jobs_do_not_take_room_larger_pieces_need() -> None:
    # Three 8-GPU nodes, 24 GPUs asked: a (8 + 2 over two nodes), e and f (4), c and d (3).
    # Placing whole jobs largest first puts a's 2 on an empty node, e beside it, and d
    # finds no node; placing pieces largest first across jobs packs all of them:
    # a's 8 | e + f | c + d + a's 2.
    cls = [NodeClass("t", 8, ("n0", "n1", "n2"))]
    jobs = {"a": (8, 2), "e": (4,), "f": (4,), "c": (3,), "d": (3,)}
    options = [_option(i, Job(j, (sum(p),), 1e6), None) for i, (j, p) in enumerate(jobs.items())]
    chosen = [
        ClassColumn(i, 1.0, "t", tuple((0, g) for g in p), None, False)
        for i, p in enumerate(jobs.values())
    ]
    placed = place(chosen, cls, {"n0": 8, "n1": 8, "n2": 8}, options)
    assert sorted(placed) == [0, 1, 2, 3, 4]
    assert placed[0][0].as_dict() == {"n0": 8, "n2": 2}
    assert placed[1][0].as_dict() == {"n1": 4} and placed[2][0].as_dict() == {"n1": 4}
    assert placed[3][0].as_dict() == {"n2": 3} and placed[4][0].as_dict() == {"n2": 3}
    # leaving d (worth 1.0) out is within a tolerance of 1.5: whole jobs, as before
    placed = place(chosen, cls, {"n0": 8, "n1": 8, "n2": 8}, options, tolerance=1.5)
    assert sorted(placed) == [0, 1, 2, 3]
    assert placed[0][0].as_dict() == {"n0": 8, "n1": 2}


def test_a_job_whose_piece_finds_no_node_gives_back_its_other_pieces() -> None:
    # b needs 6 + 6 on two distinct nodes; a's 8 leaves only n1 with room for a 6.
    cls = [NodeClass("t", 8, ("n0", "n1"))]
    options = [_option(0, Job("a", (8,), 1e6), None), _option(1, Job("b", (12,), 1e6), None)]
    chosen = [
        ClassColumn(0, 1.0, "t", ((0, 8),), None, False),
        ClassColumn(1, 1.0, "t", ((0, 6), (0, 6)), None, False),
        ClassColumn(2, 1.0, "t", ((0, 2),), None, False),
    ]
    options.append(_option(2, Job("c", (2,), 1e6), None))
    placed = place(chosen, cls, {"n0": 8, "n1": 8}, options)
    assert sorted(placed) == [0, 2]
    assert placed[2][0].as_dict() == {"n1": 2}
