"""submitit plugin of hops: ``submitit.AutoExecutor(folder, cluster="hops")``.

Python users submit functions as with submitit's Slurm executor; the job goes
through ``hops submit`` (held, tagged with a demand set and a size) so hopsd
places it on the GPUs it gains most from. State and results read back as with
submitit's Slurm executor, and hops's checkpoint notice (SIGUSR1 to the batch
script) goes through submitit's checkpointing: a ``Checkpointable`` is saved
and the job is requeued held, for hopsd to place again, resuming from there.

Registered for submitit through the ``submitit`` entry points in
pyproject.toml (install ``hops-scheduler[submitit]``).
"""

from hops_submitit.environment import HopsJobEnvironment
from hops_submitit.executor import HopsExecutor, HopsJob
from hops_submitit.watcher import HopsInfoWatcher

__all__ = ["HopsExecutor", "HopsInfoWatcher", "HopsJob", "HopsJobEnvironment"]
