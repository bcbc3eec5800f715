"""The job-side probe of hops, as ``hopsd.probe``: the very module ``hops_probe``.

The probe lives in ``probe/hops_probe`` so that it installs on its own into a
training environment (``pip install ./probe``, standard library only); hops
installs it too. Importing ``hopsd.probe`` gives the same module object, so
both names share one state. From a bare checkout on ``PYTHONPATH`` (no
install) the probe is found next to this package.
"""

import sys
from pathlib import Path

try:
    import hops_probe
except ImportError:  # a checkout used without installing it
    sys.path.append(str(Path(__file__).resolve().parents[1] / "probe"))
    import hops_probe
from hops_probe import *  # noqa: F403 - the names, for readers and type checkers

sys.modules[__name__] = hops_probe
