#!/usr/bin/env bash
# Install everything and run the whole test suite: lint, types, import
# contracts, then pytest against the live Slurm test cluster and PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install.sh

# PostgreSQL: this machine kind starts it; restart it if it is down.
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi

echo "== ruff"
.venv/bin/ruff check .
echo "== mypy --strict hopsd/core; mypy hopsd cli"
.venv/bin/mypy --strict hopsd/core
.venv/bin/mypy hopsd cli
echo "== import contracts"
.venv/bin/lint-imports

if [ -f docker/cluster.sh ]; then
    echo "== Slurm test cluster up"
    cluster_out="$(bash docker/cluster.sh up)"
    echo "$cluster_out" | tail -n 5
    eval "$(echo "$cluster_out" | grep '^export ')"
    trap 'echo "== Slurm test cluster down"; bash docker/cluster.sh down || true' EXIT
fi

echo "== pytest"
.venv/bin/pytest "$@"
