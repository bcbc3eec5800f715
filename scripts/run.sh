#!/usr/bin/env bash
# Install hops and run its main job on embedded defaults: a local Slurm test
# cluster (three GPU generations, per-server speeds), hopsd scheduling it from a
# SQLite ledger, and a small deep-learning workload submitted with `hops submit`.
# Shows `hops status` while it runs, then `hops fairness`, the per-server speeds
# hops learned (`hops nodes`), `hops history`, the whole story of each job
# (`hops show`) and the run replayed under each policy (`hops replay`).
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
# Then a learning-rate sweep of one model, one GPU per run, two runs kept to
# each of two GPU types (--types). On the idle cluster the two runs of a type
# are profiled on its two servers in turn; when they then run on one server (as
# hops usually packs them), one of them has run on both at the same size: what
# tells hops each server's own speed beside the type's (hops nodes).
# name | GPU type | samples (about 20 s on a full-speed server)
sweep=(
    "sweep-a-lr0.1|a100|16000" "sweep-a-lr0.2|a100|16000"
    "sweep-v-lr0.1|v100|8000" "sweep-v-lr0.2|v100|8000"
)
since="$(date -u +%Y-%m-%dT%H:%M:%S)"
jobs=()

# submit NAME GPUS SAMPLES SPEED [hops submit options...]
submit() {
    local name="$1" gpus="$2" samples="$3" speed="$4"
    shift 4
    local script="${demo}/${name}.sh"
    # The job ignores hops's checkpoint notice (USR1) until its probe takes it
    # over: a notice that comes while the script is still starting must not kill it.
    cat > "${script}" <<JOB
#!/bin/bash
#SBATCH -J demo-${name}
#SBATCH -o ${demo}/${name}-%j.out
#SBATCH --open-mode=append
#SBATCH -t 60
trap '' USR1
exec ${ROOT}/.venv/bin/python ${ROOT}/examples/train_synthetic.py --samples ${samples} --speed ${speed}
JOB
    chmod +x "${script}"
    local id
    id="$(cd "${demo}" && hops submit "${script}" --gpus "${gpus}" --samples "${samples}" \
        --model "${name}" --parsable "$@")"
    echo "job ${id}: ${name} (GPUs ${gpus}, ${samples} samples${*:+, $*})"
    jobs+=("${id}")
}

# submit_real NAME GPUS SAMPLES: the real PyTorch template (examples/pytorch/train.sh,
# a small CNN with DDP) from a copy of its folder, as a user submits it. The test
# cluster's GPUs are fake: --device-rate makes each step last as long as on the
# GPU type it was placed on, so hops sees the types differ.
submit_real() {
    local name="$1" gpus="$2" samples="$3" folder="${demo}/$1"
    mkdir -p "${folder}"
    cp "${ROOT}"/examples/pytorch/*.py "${ROOT}/examples/pytorch/train.sh" "${folder}/"
    sed -i -e "s|^#SBATCH --job-name=.*|#SBATCH --job-name=demo-${name}|" \
        -e "s|^#SBATCH --output=.*|#SBATCH --output=${demo}/${name}-%j.out|" "${folder}/train.sh"
    local id
    id="$(cd "${folder}" && PYTHON="${ROOT}/.venv/bin/python" \
        TRAIN_ARGS="--width 8 --device-rate k80=100,v100=250,a100=600" \
        hops submit train.sh --gpus "${gpus}" --samples "${samples}" --batch-size 32 \
        --lr 0.02 --lr-scale linear --model "${name}" --parsable)"
    echo "job ${id}: ${name} (real PyTorch DDP, GPUs ${gpus}, ${samples} samples)"
    jobs+=("${id}")
}

# Shows hops status every 15 s until every job submitted so far has left Slurm's
# queue and hops has no active job (a job just submitted is in Slurm before
# hopsd adopts it).
wait_for_jobs() {
    local started=${SECONDS} queued active
    while true; do
        queued="$(squeue -h -j "$(IFS=,; echo "${jobs[*]}")" -t PD,CF,R,CG,S -o %i | wc -l)"
        active="$(hops status --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')"
        if [ "${queued}" = 0 ] && [ "${active}" = 0 ]; then
            echo "== all jobs finished in $((SECONDS - started)) s"
            return
        fi
        if (( SECONDS - started > TIMEOUT_S )); then
            echo "workload not finished after ${TIMEOUT_S} s; see ${demo}/hopsd.log" >&2
            hops status --all
            exit 1
        fi
        hops status --all
        sleep 15
    done
}

echo "== submitting $(( ${#workload[@]} + 1 )) jobs with hops submit (one a real PyTorch job)"
for entry in "${workload[@]}"; do
    IFS='|' read -r name gpus samples speed <<< "${entry}"
    submit "${name}" "${gpus}" "${samples}" "${speed}"
done
submit_real cnn-ddp 1,2,4 24000
echo "== waiting for the workload (hops status every 15 s, up to ${TIMEOUT_S} s)"
wait_for_jobs
echo "== a learning-rate sweep of ${#sweep[@]} one-GPU runs, each kept to one GPU type"
for entry in "${sweep[@]}"; do
    IFS='|' read -r name type samples <<< "${entry}"
    submit "${name}" 1 "${samples}" "k80=1,v100=2,a100=4" --types "${type}"
done
wait_for_jobs
hops fairness
echo "== what hops learned of each server: SPEED is its per-GPU throughput against the"
echo "   best server of its type, on the same jobs at the same size (hops nodes)"
hops nodes
echo "== what happened to each job (hops history, then hops show of each)"
hops history --all --since "${since}"
for id in "${jobs[@]}"; do
    hops show "${id}"
done
echo "== the same jobs replayed by the simulator under each policy (hops replay)"
hops replay --from "${since}"
echo "The test cluster is still up: 'eval \"\$(bash docker/cluster.sh up | grep ^export)\"' to use it,"
echo "'bash docker/cluster.sh down' to stop it."
