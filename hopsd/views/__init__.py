"""Plain payloads of what hops shows about jobs, shared by the ``hops`` command and hopsd.

Pure functions of ledger records (no I/O, no SQLAlchemy), so a status page in
the daemon and the CLI's ``--json`` print the same numbers under the same names.
"""
