#!/usr/bin/env bash
# Install what hops needs on a Debian 12 host, as root: Python venv (.venv) with
# hops, its development tools and MkDocs. Slurm packages are installed by
# docker/cluster.sh when the test cluster is brought up.
set -euo pipefail
cd "$(dirname "$0")/.."

# Users run `hops` from this venv: by default it is made from a Python every
# user can execute (not pyenv's in /root, say): scripts/venv_python.sh chooses.
if [ ! -x .venv/bin/python ]; then
    PYTHON="$(bash scripts/venv_python.sh)"
fi
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    echo "hops needs Python >= 3.11 as '$PYTHON'" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    if ! "$PYTHON" -m venv .venv 2>/dev/null; then
        apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv
        rm -rf .venv && "$PYTHON" -m venv .venv
    fi
fi
# promtool (Debian's prometheus package) checks and unit-tests contrib/prometheus
# rules; tests/ops also runs a real Prometheus against hopsd.
if ! command -v promtool >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends prometheus >/dev/null
fi
# Debian's chromium: tests/daemon loads hopsd's status page in a headless browser.
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends chromium >/dev/null
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
# setuptools prints a generic notice box for every editable install (folders
# named like a package may shadow it); the wheel install has no such notice.
# The distribution was called "hops" before it had a name of its own on the
# package index; a venv made then still has it (same modules): remove it.
if .venv/bin/python -m pip show hops 2>/dev/null | grep -q "^Editable project location: $(pwd)\$"; then
    .venv/bin/python -m pip uninstall -q -y hops 2>&1 | grep -v '^WARNING' || true
fi
# constraints/ci.txt pins every package at the version tested (scripts/pin_constraints.py).
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints/ci.txt \
    -e ./probe -e ".[dev,docs]" 2>&1 \
    | sed '/BuildBackendWarning: Editable installation/,/WheelFile(wheel_path/d' \
    | grep -v -e '^WARNING: Location' || true
.venv/bin/python -c 'import hopsd, hops_cli, hops_probe' || { echo "hops failed to install" >&2; exit 1; }
# Real training jobs (examples/pytorch, tests/daemon/test_live_real_pytorch.py): PyTorch and Lightning.
# torch is pinned so pip takes the CPU build this machine kind keeps on disk
# (elsewhere it downloads the release); the examples accept any torch 2.
if ! .venv/bin/python -c 'import torch, lightning' 2>/dev/null; then
    .venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" \
        -r examples/pytorch/requirements.txt 2>&1 | grep -v -e '^WARNING: Location' || true
fi
.venv/bin/python -c 'import torch, lightning' || { echo "PyTorch failed to install" >&2; exit 1; }
# Tell (do not fail: the test suite runs as root) when users could not run hops from here.
bash scripts/venv_users.sh .venv || true
