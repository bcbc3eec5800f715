"""Read-only documents of the ledger and the cluster.

Shared by the hops command and hopsd's status page (the daemon must not import the CLI).
"""
