"""What loading the submitit plugin brings into a user's Python: the Slurm port and
hops's configuration, not the planner, the ledger or the simulator."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("numpy", "highspy", "scipy", "sqlalchemy", "matplotlib", "hopsd.ledger", "hopsd.sim",
         "hopsd.daemon", "hopsd.views", "hops_cli")  # fmt: skip


def test_importing_the_plugin_loads_neither_planner_nor_ledger() -> None:
    code = (
        "import json, sys, hops_submitit\n"
        "from hops_submitit.port import configured_port\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout  # fmt: skip
    loaded = set(json.loads(out))
    assert "hopsd.slurm.port" in loaded and "hopsd.config" in loaded
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    assert heavy == [], heavy
