"""Installed distributions made by hand: a ``*.dist-info`` folder and modules on sys.path.

``importlib.metadata`` finds a distribution by its ``.dist-info`` folder on any
sys.path entry, exactly as it finds one pip installed, so discovery is tested
against real metadata without installing anything.
"""

from __future__ import annotations

from pathlib import Path

#: A plug-in module: the policy "idle" keeps what runs and starts nothing; its settings
#: have one field of each kind a table may set.
IDLE = """
from dataclasses import dataclass

from hopsd.core.policies import PolicySpec
from hopsd.core.policies.common import keep_running


@dataclass(frozen=True)
class IdleSettings:
    note: str = "idle"
    level: int = 1
    weight: float = 0.5
    loud: bool = False


class IdlePolicy:
    def __init__(self, name, own):
        self.name = name
        self.own = own

    def plan(self, snapshot, settings):
        return keep_running(snapshot, self.own.note)

    plan_fragment = plan


SPEC = PolicySpec("idle", lambda own: IdlePolicy("idle", own), IdleSettings())
MISNAMED = PolicySpec("other", lambda own: IdlePolicy("other", own), IdleSettings())
NOT_A_SPEC = 42
"""


def write_dist(
    site: Path, dist: str, entries: dict[str, str], modules: dict[str, str] | None = None
) -> None:
    """Distribution ``dist`` in ``site``, declaring ``entries`` in the group hops.policies."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[hops.policies]\n{lines}")
    for module, text in (modules or {}).items():
        (site / f"{module}.py").write_text(text)
