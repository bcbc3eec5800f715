"""hopsd.slurm: the Slurm port (protocol, CLI and pyslurm backends, pure parsers).

Import what you use from its modules (``hopsd.slurm.errors``, ``hopsd.slurm.port``,
``hopsd.slurm.factory``, ...). The package itself imports nothing: a command that
only needs the port's errors (``hops status`` reading its configuration) should not
load every backend and parser on the way.
"""
