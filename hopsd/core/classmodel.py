"""The class-level ILP: one column per *kind* of placement, nodes chosen afterwards.

On a large cluster most nodes of a type look alike to most jobs (same GPU
type, same idle GPUs, nothing measured about the job there). A per-node model
repeats every column once per such node, which makes the ILP grow with
``jobs x nodes``. Here nodes are grouped into :class:`NodeClass` es and a column
says only "job i takes R GPUs on one node of class C" (or, distributed, one
piece per node over several nodes of given classes). Placements that must be
exact -- a running job's current place, a node where the estimator knows this
very job (entity layer) -- stay exact *pinned* columns.

Rows: one per job (at most one column), one per class (its GPUs), packing rows
per class (at most ``(m - 1) * k`` pieces larger than ``c / m`` fit in ``k``
nodes of ``c`` GPUs, for m = 2, 3, 4), and one per node holding pinned pieces.
These rows are necessary, not sufficient, for the pieces to fit the nodes, so
after solving, pieces are placed best-fit, largest first (whole jobs; single
pieces across jobs when whole jobs leave more than the solver's gap unplaced
and that places more); a running job whose
pieces do not fit keeps its current placement if those GPUs are still free,
any other such job is left out of this plan, and the fragment plans that follow
(per-node, exact) use whatever GPUs it leaves idle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hopsd.core.candidates import (
    JobOptions,
    idle_move_factor,
    onto_idle,
    restart_factor,
    same_placement,
    staying_value,
)
from hopsd.core.configgen import TypeLayout
from hopsd.core.gains import move_cost_s
from hopsd.core.ilp import AssignmentProblem, Solution, solve_assignment
from hopsd.core.model import Configuration

PACKING_DIVISORS = (2, 3, 4)


@dataclass(frozen=True, slots=True)
class NodeClass:
    """Interchangeable nodes: same type, idle GPUs, GPUs left if running jobs stay, speed prior."""

    gpu_type: str
    capacity: int
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClassColumn:
    """A job's option: either ``pieces`` (class index, GPUs) or an exact ``pinned`` placement."""

    option: int
    value: float
    gpu_type: str
    pieces: tuple[tuple[int, int], ...]
    pinned: Configuration | None
    keep: bool


def node_classes(layouts: Sequence[TypeLayout]) -> tuple[list[NodeClass], dict[str, int]]:
    """Group every node with idle GPUs by (type, idle, settled, speed prior), in cluster order."""
    keyed: dict[tuple[str, int, int, float], list[str]] = {}
    for layout in layouts:
        for node, idle, settled, speed in zip(
            layout.nodes, layout.idle, layout.settled, layout.speed, strict=True
        ):
            keyed.setdefault((layout.gpu_type, idle, settled, speed), []).append(node.id)
    classes = [NodeClass(t, idle, tuple(ids)) for (t, idle, _, _), ids in keyed.items()]
    of = {node_id: c for c, cls in enumerate(classes) for node_id in cls.members}
    return classes, of


def class_columns(
    options: Sequence[JobOptions],
    class_of: Mapping[str, int],
    round_length_s: float,
    restart_penalty_s: float,
    price_restarts: bool = False,
    settled: Mapping[str, int] | None = None,
    classes: Sequence[NodeClass] = (),
    *,
    unlearned_restart_s: float,
) -> list[ClassColumn]:
    """Columns of every option: keep and entity placements pinned, the rest by class.

    With ``settled`` (idle GPUs per node once every running job stays) a running
    job's move onto idle GPUs is valued as :func:`~hopsd.core.candidates.idle_move_factor`
    says; a class counts as idle for a piece only when every node of it is.
    ``unlearned_restart_s``: see :class:`~hopsd.core.candidates.PassSpec`.
    """
    out: list[ClassColumn] = []
    pieces_of: dict[Configuration, tuple[tuple[int, int], ...]] = {}  # shared by every job
    room = _class_room(classes, settled) if settled is not None else None
    for o, opt in enumerate(options):
        job = opt.member.job
        w = opt.member.weight
        cost = move_cost_s(job.restart_s, unlearned_restart_s)
        factor = restart_factor(job, round_length_s, cost, price_restarts)
        idle = factor
        if room is not None and settled is not None:
            idle = idle_move_factor(opt, round_length_s, cost, restart_penalty_s, factor)
        stay = staying_value(opt, round_length_s, cost) if price_restarts else 0.0
        if opt.keep_gain is not None and job.current is not None:
            keep = w * opt.keep_gain + stay
            out.append(ClassColumn(o, keep, job.current.gpu_type, (), job.current, True))
        if opt.member.keep_only:
            continue
        for group, gain in zip(opt.groups, opt.gains, strict=True):
            rep = group.configs[0]
            if opt.distinct and not opt.distinct.isdisjoint(rep.node_ids):
                if job.current is None or not same_placement(rep, job.current):
                    f = factor
                    if idle != factor and settled is not None and job.current is not None:
                        f = idle if onto_idle(rep, settled, job.current) else factor
                    out.append(ClassColumn(o, w * gain * f + stay, rep.gpu_type, (), rep, False))
            else:
                pieces = pieces_of.get(rep)
                if pieces is None:
                    pieces = tuple((class_of[n], g) for n, g in rep.parts)
                    pieces_of[rep] = pieces
                f = factor
                if idle != factor and room is not None and all(room[c] >= g for c, g in pieces):
                    f = idle
                out.append(ClassColumn(o, w * gain * f + stay, rep.gpu_type, pieces, None, False))
    return out


def _class_room(classes: Sequence[NodeClass], settled: Mapping[str, int]) -> list[int]:
    """Per class, the idle GPUs every one of its nodes keeps once every running job stays."""
    return [min(settled.get(n, 0) for n in cls.members) for cls in classes]


def _rows(
    classes: Sequence[NodeClass],
    columns: Sequence[ClassColumn],
    class_of: Mapping[str, int],
    free: Mapping[str, int],
) -> tuple[list[list[tuple[int, int]]], list[int]]:
    """Usage of every column over the resource rows, and the rows' capacities."""
    capacity: list[int] = []
    class_row: list[int] = []
    packing_row: dict[tuple[int, int], int] = {}
    for c, cls in enumerate(classes):
        class_row.append(len(capacity))
        capacity.append(cls.capacity * len(cls.members))
        for m in PACKING_DIVISORS:
            if cls.capacity >= m:
                packing_row[(c, m)] = len(capacity)
                capacity.append((m - 1) * len(cls.members))
    node_row: dict[str, int] = {}
    for col in columns:
        if col.pinned is not None:
            for n, _ in col.pinned.parts:
                if n not in node_row:
                    node_row[n] = len(capacity)
                    capacity.append(free[n])
    usage: list[list[tuple[int, int]]] = []
    by_pieces: dict[tuple[tuple[int, int], ...], list[tuple[int, int]]] = {}
    for col in columns:
        if col.pinned is None:
            shared = by_pieces.get(col.pieces)
            if shared is not None:  # many jobs ask the same pieces: same rows
                usage.append(shared)
                continue
        row_use: dict[int, int] = {}
        pieces = col.pieces
        if col.pinned is not None:
            pieces = tuple((class_of[n], g) for n, g in col.pinned.parts)
            for n, g in col.pinned.parts:
                row_use[node_row[n]] = row_use.get(node_row[n], 0) + g
        for c, g in pieces:
            row_use[class_row[c]] = row_use.get(class_row[c], 0) + g
            for m in PACKING_DIVISORS:
                r = packing_row.get((c, m))
                if r is not None and g * m > classes[c].capacity:
                    row_use[r] = row_use.get(r, 0) + 1
        usage.append(sorted(row_use.items()))
        if col.pinned is None:
            by_pieces[col.pieces] = usage[-1]
    return usage, capacity


@dataclass(frozen=True)
class ClassPlan:
    """Exact placements by option index (config, kept) and the solver's answer."""

    placed: dict[int, tuple[Configuration, bool]]
    solution: Solution
    columns: int


def solve_classes(
    options: Sequence[JobOptions],
    layouts: Sequence[TypeLayout],
    free: Mapping[str, int],
    round_length_s: float,
    restart_penalty_s: float,
    mip_gap: float,
    time_limit_s: float,
    price_restarts: bool = False,
    node_limit: int | None = None,
    settled: Mapping[str, int] | None = None,
    *,
    unlearned_restart_s: float,
) -> ClassPlan:
    """Build, solve and place the class-level model (``settled``, ``unlearned_restart_s``:
    see :func:`class_columns`)."""
    classes, class_of = node_classes(layouts)
    columns = class_columns(
        options,
        class_of,
        round_length_s,
        restart_penalty_s,
        price_restarts,
        settled,
        classes,
        unlearned_restart_s=unlearned_restart_s,
    )
    usage, capacity = _rows(classes, columns, class_of, free)
    problem = AssignmentProblem(
        n_jobs=len(options),
        col_job=[c.option for c in columns],
        value=[c.value for c in columns],
        usage=usage,
        capacity=capacity,
    )
    warm = [i for i, c in enumerate(columns) if c.keep]
    solution = solve_assignment(
        problem, mip_gap=mip_gap, time_limit=time_limit_s, warm_start=warm, node_limit=node_limit
    )
    chosen = [columns[i] for i in solution.chosen]
    placed = place(chosen, classes, free, options, mip_gap * solution.objective)
    return ClassPlan(placed, solution, len(columns))


def place(
    chosen: Sequence[ClassColumn],
    classes: Sequence[NodeClass],
    free: Mapping[str, int],
    options: Sequence[JobOptions],
    tolerance: float = 0.0,
) -> dict[int, tuple[Configuration, bool]]:
    """Chosen columns as node placements: pinned first, then pieces best-fit, largest first.

    Jobs are placed whole, the job with the largest piece first, each piece on
    the fullest node that holds it. When the jobs that then find no nodes are
    worth more than ``tolerance`` (the solver's gap: a plan that close to the
    bound is as good as the operator asked), the pieces are placed again one
    by one across jobs, largest first (best-fit decreasing over pieces, a job's
    pieces on distinct nodes), so that the small pieces of distributed jobs do
    not take the room larger pieces need; that packing is used when it places
    more of the plan's value. A job with a piece that finds no place gets none.
    """
    left = dict(free)
    placed: dict[int, tuple[Configuration, bool]] = {}
    for col in chosen:
        if col.pinned is not None:
            for n, g in col.pinned.parts:
                left[n] -= g
            placed[col.option] = (col.pinned, col.keep)
    flexible = {c.option: c for c in chosen if c.pinned is None}
    packing = _pack(flexible, classes, left, options, by_piece=False)
    lost = sum(flexible[o].value for o in packing.failed)
    if lost > tolerance:
        other = _pack(flexible, classes, left, options, by_piece=True)
        if other.value(flexible) > packing.value(flexible) + 1e-12:
            packing = other
    for o, col in flexible.items():
        if o in packing.failed:
            if o in packing.kept:
                placed[o] = (packing.kept[o], True)
            continue
        config = Configuration.of(col.gpu_type, dict(packing.parts[o]))
        current = options[o].member.job.current
        kept = current is not None and same_placement(config, current)
        placed[o] = (current if kept and current is not None else config, kept)
    return placed


def _pack(
    flexible: Mapping[int, ClassColumn],
    classes: Sequence[NodeClass],
    free: Mapping[str, int],
    options: Sequence[JobOptions],
    by_piece: bool,
) -> _Packing:
    """Best-fit decreasing over whole jobs (largest piece first) or over single pieces.

    A running job that finds no nodes keeps its current GPUs when they are still
    free (:func:`_keep_instead`): at once when whole jobs are placed, after every
    piece when single pieces are.
    """
    packing = _Packing(classes, dict(free))
    if by_piece:
        pieces = sorted(
            ((g, o, c) for o, col in flexible.items() for c, g in col.pieces),
            key=lambda p: (-p[0], p[1]),
        )
    else:
        jobs = sorted(
            flexible.values(),
            key=lambda c: (-max(g for _, g in c.pieces), -sum(g for _, g in c.pieces), c.option),
        )
        pieces = [
            (g, col.option, c) for col in jobs for c, g in sorted(col.pieces, key=lambda p: -p[1])
        ]
    for g, o, c in pieces:
        if o not in packing.failed and not packing.put(o, c, g):
            packing.failed.add(o)
            packing.remove(o)
            if not by_piece:
                packing.keep_instead(o, options[o])
    if by_piece:
        for o in sorted(packing.failed):
            packing.keep_instead(o, options[o])
    return packing


def _keep_instead(option: JobOptions, left: dict[str, int]) -> Configuration | None:
    """A running job the ILP chose to serve, whose pieces found no nodes, stays where it
    is when its GPUs are still free: the plan meant it to run, and stopping it would
    cost it its progress and a restart. ``left`` is updated when it stays."""
    current = option.member.job.current
    if current is None or option.keep_gain is None:
        return None
    if any(left[n] < g for n, g in current.parts):
        return None
    for n, g in current.parts:
        left[n] -= g
    return current


class _Packing:
    """Pieces placed on the nodes of their classes, GPUs ``left`` per node, jobs that ``failed``."""

    def __init__(self, classes: Sequence[NodeClass], left: dict[str, int]) -> None:
        self.classes = classes
        self.left = left
        self.parts: dict[int, list[tuple[str, int]]] = {}
        self.failed: set[int] = set()
        self.kept: dict[int, Configuration] = {}  # failed jobs staying where they are

    def keep_instead(self, option: int, job: JobOptions) -> None:
        kept = _keep_instead(job, self.left)
        if kept is not None:
            self.kept[option] = kept

    def value(self, columns: Mapping[int, ClassColumn]) -> float:
        """The plan's value of the columns placed."""
        return sum(col.value for o, col in columns.items() if o not in self.failed)

    def put(self, option: int, c: int, g: int) -> bool:
        """Place one piece of ``option`` best-fit on a node of class ``c`` it does not use yet."""
        used = {n for n, _ in self.parts.get(option, ())}
        left = self.left
        best: str | None = None
        for n in self.classes[c].members:
            if n in used or left[n] < g:
                continue
            if best is None or left[n] < left[best]:
                best = n
        if best is None:
            return False
        left[best] -= g
        self.parts.setdefault(option, []).append((best, g))
        return True

    def remove(self, option: int) -> None:
        """Give back every piece ``option`` holds."""
        for n, g in self.parts.pop(option, []):
            self.left[n] += g
