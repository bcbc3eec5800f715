"""Parts of a tick that tests run alone, built from the tick's own pieces."""

from __future__ import annotations

from hopsd.daemon.observe import observe
from hopsd.daemon.reconcile import ReconcileReport
from hopsd.daemon.snapshot_builder import build_cluster_view
from hopsd.daemon.tick import Tick


def observe_and_reconcile(tick: Tick) -> ReconcileReport:
    """Only a tick's first two steps: adopt and follow jobs, decide nothing.

    Lets a test seed what the estimator knows of newly adopted jobs, or look at
    the ledger, before their first decision.
    """
    obs = observe(tick.port, tick.clock)
    view = build_cluster_view(obs.nodes, tick.config, {})
    with tick.ledger.unit() as unit:
        return tick.reconciler.run(unit, obs, view, tick.clock())
