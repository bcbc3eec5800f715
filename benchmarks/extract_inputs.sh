#!/usr/bin/env bash
# Puts the public inputs of benchmarks/dominance.py's trace families in a directory
# outside the repository, from a git copy of their publishers' repositories.
#
#   benchmarks/extract_inputs.sh sia   SIA_GIT   [OUT]          # OUT: ~/.cache/hops/inputs/sia
#   benchmarks/extract_inputs.sh gavel GAVEL_GIT PYTHON [OUT]   # OUT: ~/.cache/hops/inputs/gavel
#
# SIA_GIT: the git directory of github.com/siasosp23/artifacts (a clone's .git or a
# bare copy), measured at commit aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70. Writes
# OUT/workloads/{saturn,philly,newtrace}/workload-N.csv and OUT/traces/ (Sia's
# per-application profiles), the layout dominance.py's --sia-dir reads; the hops
# cluster file of Sia's 64-GPU cluster is examples/sim/sia-cluster.toml.
#
# GAVEL_GIT: the git directory of github.com/stanford-futuredata/gavel (measured at
# commit c4fa40097339e9608ab71fd64c8bdea96a5e4a4c). Runs Gavel's own generator,
# scheduler/scripts/utils/generate_trace.py, with PYTHON (an interpreter with numpy,
# scipy, psutil and cvxpy, which Gavel's modules import: e.g. a venv made by
# `python3 -m venv V && V/bin/pip install numpy scipy psutil cvxpy`): 300 jobs with
# multi-GPU jobs (-m) at 4, 8 and 12 jobs an hour (Poisson, --lam 3600/rate), seeds 0
# and 1, into OUT/rate<R>-seed<S>.trace, and copies Gavel's
# scheduler/simulation_throughputs.json to OUT/throughputs.json: what --gavel-dir reads.
set -euo pipefail

rev=${REV:-HEAD}

extract() {  # extract GIT PREFIX STRIP OUT: the blobs under PREFIX into OUT, less STRIP
    local git=$1 prefix=$2 strip=$3 out=$4 mode type sha path
    git --git-dir="$git" ls-tree -r "$rev" -- "$prefix" | while read -r mode type sha path; do
        [[ $type == blob ]] || continue
        if ! git --git-dir="$git" cat-file -e "$sha" 2>/dev/null; then
            echo "not in this copy, skipped: $path" >&2
            continue
        fi
        mkdir -p "$out/$(dirname "${path#"$strip"}")"
        git --git-dir="$git" cat-file blob "$sha" >"$out/${path#"$strip"}"
    done
}

case ${1:-} in
sia)
    git=$2 out=${3:-$HOME/.cache/hops/inputs/sia}
    for part in workloads/saturn workloads/philly workloads/newtrace traces; do
        extract "$git" "sia-simulator/$part" sia-simulator/ "$out"
    done
    echo "Sia's workloads and profiles in $out ($(git --git-dir="$git" rev-parse "$rev"))"
    ;;
gavel)
    git=$2 python=$3 out=${4:-$HOME/.cache/hops/inputs/gavel}
    src=$(mktemp -d)
    trap 'rm -rf "$src"' EXIT
    # Gavel's scheduler modules the generator imports (not its traces or logs)
    git --git-dir="$git" ls-tree -r --name-only "$rev" -- scheduler |
        grep -E '^scheduler/([^/]+\.(py|json)|policies/[^/]+\.py|scripts/utils/generate_trace\.py)$' |
        while read -r path; do
            mkdir -p "$src/$(dirname "$path")"
            git --git-dir="$git" show "$rev:$path" >"$src/$path"
        done
    mkdir -p "$out"
    for rate in 4 8 12; do
        for seed in 0 1; do
            (cd "$src/scheduler/scripts/utils" &&
                "$python" generate_trace.py --num_jobs 300 --lam "$((3600 / rate))" \
                    --seed "$seed" -m --throughputs_file ../../simulation_throughputs.json \
                    --output_file "$out/rate$rate-seed$seed.trace")
        done
    done
    cp "$src/scheduler/simulation_throughputs.json" "$out/throughputs.json"
    echo "Gavel's generator traces and throughputs in $out ($(git --git-dir="$git" rev-parse "$rev"))"
    ;;
*)
    sed -n '2,21p' "$0" >&2
    exit 2
    ;;
esac
