"""The sensing tests' hops.conf: the daemon tests' small cluster, profiling on or off."""

from __future__ import annotations

from hops_conf import FAKE, merged, render

from hopsd.config import HopsConfig, parse_config


def sensing_config(profiling: bool) -> HopsConfig:
    """The fake cluster's hops.conf with quick profiling (3 iterations, 5 s) or none."""
    scheduler = {"profiling": profiling, "profiling_iterations": 3, "profiling_timeout_s": 5.0}
    return parse_config(render(merged(FAKE, {"scheduler": scheduler})))
