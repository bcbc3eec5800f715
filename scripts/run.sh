#!/usr/bin/env bash
# Install hops and run its main job on embedded defaults: a local Slurm test
# cluster (three GPU generations, per-server speeds), hopsd scheduling it from a
# SQLite ledger, and a small deep-learning workload submitted with `hops submit`.
# Shows `hops status` while it runs, then `hops fairness`, `hops nodes`,
# `hops history` and the whole story of one job (`hops show`).
# The cluster stays up afterwards; stop it with: bash docker/cluster.sh down
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
TIMEOUT_S="${HOPS_DEMO_TIMEOUT_S:-900}"

bash scripts/install.sh
export PATH="${ROOT}/.venv/bin:${PATH}"

echo "== Slurm test cluster"
cluster_out="$(bash docker/cluster.sh up)"
eval "$(echo "${cluster_out}" | grep '^export ')"
echo "${cluster_out}" | tail -n 4

echo "== ledger"
hops db upgrade

demo="${HOPS_CLUSTER_DIR}/demo"
spool="${HOPS_CLUSTER_DIR}/hops-spool"
# Job ids restart at 1 with a fresh cluster: a previous demo's checkpoints and
# reports would be taken for the new jobs' own.
rm -rf "${demo}" "${spool}"
mkdir -p "${demo}" "${spool}"

echo "== hopsd (log: ${demo}/hopsd.log)"
hopsd > "${demo}/hopsd.log" 2>&1 &
hopsd_pid=$!
trap 'kill -TERM "${hopsd_pid}" 2>/dev/null || true; wait "${hopsd_pid}" 2>/dev/null || true' EXIT

# name | acceptable GPU counts | samples | model speed per GPU type
workload=(
    "resnet50|1,2,4|24000|k80=1,v100=2.5,a100=6"
    "distilbert|1,2|12000|k80=1,v100=1.6,a100=2"
    "vit|2,4|30000|k80=1,v100=2,a100=4"
    "mobilenet|1|6000|k80=1,v100=1.5,a100=2"
    "gpt2|4|40000|k80=1,v100=3,a100=8"
    "vgg11|1,2|10000|k80=1,v100=2,a100=3"
    "wav2vec2|2|14000|k80=1,v100=2,a100=5"
    "regnet|1,2,4|16000|k80=1,v100=2,a100=4"
)
echo "== submitting ${#workload[@]} jobs with hops submit"
for entry in "${workload[@]}"; do
    IFS='|' read -r name gpus samples speed <<< "${entry}"
    script="${demo}/${name}.sh"
    cat > "${script}" <<JOB
#!/bin/bash
#SBATCH -J demo-${name}
#SBATCH -o ${demo}/${name}-%j.out
#SBATCH --open-mode=append
#SBATCH -t 60
export HOPS_SPOOL_DIR=${spool}
exec ${ROOT}/.venv/bin/python ${ROOT}/examples/train_synthetic.py --samples ${samples} --speed ${speed}
JOB
    chmod +x "${script}"
    (cd "${demo}" && hops submit "${script}" --gpus "${gpus}" --samples "${samples}" --model "${name}")
done

echo "== waiting for the workload (hops status every 15 s, up to ${TIMEOUT_S} s)"
started=${SECONDS}
while true; do
    active="$(hops status --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')"
    if [ "${active}" = 0 ]; then
        break
    fi
    if (( SECONDS - started > TIMEOUT_S )); then
        echo "workload not finished after ${TIMEOUT_S} s; see ${demo}/hopsd.log" >&2
        hops status --all
        exit 1
    fi
    hops status --all
    sleep 15
done
echo "== all jobs finished in $((SECONDS - started)) s"
hops fairness
hops nodes
echo "== what happened to each job (hops history, then hops show of the first)"
hops history --all
first="$(hops history --all --parsable --noheader -o jobid | head -n 1)"
if [ -n "${first}" ]; then
    hops show "${first}"
fi
echo "The test cluster is still up: 'eval \"\$(bash docker/cluster.sh up | grep ^export)\"' to use it,"
echo "'bash docker/cluster.sh down' to stop it."
