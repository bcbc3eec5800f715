#!/usr/bin/env bash
# Install hops and run its main job on embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/hops version
