"""Trace-driven simulator: a simulated cluster and clock driving the same core planners.

Entry point: :func:`hopsd.sim.run.simulate`. The ground truth of how fast jobs
run lives in :mod:`hopsd.sim.truth` and is never shown to a policy; policies
see only what the estimator's store has been told.
"""
