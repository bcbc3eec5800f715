"""The ``hops`` command: submit, status, fairness, cancel, nodes, db, simulate."""
