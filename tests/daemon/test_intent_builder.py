"""One builder turns every decided action into its intents: plan entries, holds, relaunches.

The enactor, resume and the ledger read these payloads back (``relaunch``
marks a requeue that places a failed launch afresh), so each kind's chain is
pinned here exactly.
"""

from __future__ import annotations

from hopsd.core.model import Configuration
from hopsd.daemon.decide import HOLD, MOVE, PREEMPT, RELAUNCH, Action, Notice, chains
from hopsd.ledger.records import IntentAction as A


def steps(action: Action, notice: Notice | None = None) -> list[tuple[A, dict[str, object]]]:
    return [(r.action, dict(r.payload)) for r in chains([action], {}, notice)]


def test_a_hold_and_a_relaunch_are_one_intent_each() -> None:
    base = {"slurm_id": 7, "reason": "why"}
    held = chains([Action("j", 7, HOLD, None, "", 0, False)], {"j": "why"})
    assert [(r.action, dict(r.payload)) for r in held] == [(A.HOLD, {**base, "kind": "hold"})]
    again = chains([Action("j", 7, RELAUNCH, None, "", 2, False)], {"j": "why"})
    assert [(r.action, dict(r.payload)) for r in again] == [
        (A.REQUEUE_HOLD, {**base, "kind": "relaunch", "relaunch": True, "restarts": 2})
    ]


def test_a_move_under_notice_signals_requeues_and_releases_in_order() -> None:
    target = Configuration("a100", (("fast1", 4),))
    move = Action("j", 7, MOVE, target, "fast", 1, True)
    got = steps(move, Notice("USR1", 30.0))
    assert [a for a, _ in got] == [
        A.NOTICE, A.REQUEUE_HOLD, A.UPDATE, A.MAKE_ELIGIBLE, A.RELEASE
    ]  # fmt: skip
    assert got[0][1]["grace_s"] == 30.0 and got[-1][1]["run"] == 2
    assert [a for a, _ in steps(Action("j", 7, PREEMPT, None, "", 0, False))] == [A.REQUEUE_HOLD]
