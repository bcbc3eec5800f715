"""The pure Hops scheduling core.

Dataclasses in, plans out: no I/O, no clock reads, no database or subprocess
imports. The daemon and the simulator both call :func:`hopsd.core.rounds.plan_round`.
"""
