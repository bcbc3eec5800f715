"""Shadow mode says each decision once: what changed since the last tick, not every tick.

In shadow mode nothing is enacted, so the planner takes the same decision for a
job tick after tick; logging (and counting) it every time buried the one line
that mattered. :class:`ShadowMemory` remembers the last thing said per job and
lets through only actions that differ from it; a job that left the queue is
forgotten, so it is reported again if it comes back.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from hopsd.daemon.decide import Action


class ShadowMemory:
    def __init__(self) -> None:
        self._said: dict[str, str] = {}

    def fresh(self, actions: Sequence[Action], alive: Collection[str]) -> list[Action]:
        """The actions not said before for their job; forget jobs not in ``alive``."""
        self._said = {job: said for job, said in self._said.items() if job in alive}
        out = [a for a in actions if self._said.get(a.job_id) != a.describe()]
        for action in out:
            self._said[action.job_id] = action.describe()
        return out
