"""The job-side probe of hops, as ``hopsd.probe``: the very module ``hops_probe``.

The probe lives in ``probe/hops_probe`` so that it installs on its own into a
training environment (``pip install ./probe``, standard library only); hops
installs it too. Importing ``hopsd.probe`` gives the same module object, so
both names share one state.
"""

import sys

import hops_probe
from hops_probe import *  # noqa: F403 - the names, for readers and type checkers

sys.modules[__name__] = hops_probe
