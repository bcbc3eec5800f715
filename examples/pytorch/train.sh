#!/bin/bash
# A data-parallel PyTorch job under hops, on one node or on several:
#
#   hops submit train.sh --gpus 1,2,4 --samples 400000 --batch-size 32 \
#       --lr 0.05 --lr-scale linear --model cnn
#
# hops picks the GPU type, the nodes and the GPU count of every run (here 1, 2
# or 4 GPUs, on one server or spread over two, e.g. a100n1:1,a100n2:1) and may
# move the job between runs. This script starts one rank per GPU it was given:
# torchrun on one node, srun (one task per GPU) on several. train.py reads its
# rank from either, meets the other ranks on the first node of the allocation,
# checkpoints when hops gives notice and resumes on any world size.
#
# hops submit adds `trap '' USR1` before the first command: this shell, srun
# and torchrun outlive hops's notice, which reaches every rank.
#SBATCH --job-name=cnn-ddp
#SBATCH --cpus-per-gpu=2        # CPU threads of each rank (train.py uses them)
#SBATCH --output=%x-%j.out
#SBATCH --open-mode=append      # keep the output of every run
#SBATCH --time=60
set -euo pipefail

PYTHON="${PYTHON:-python3}"
# train.py takes its size and per-GPU batch from hops submit (--samples, --batch-size)
TRAIN=("${SLURM_SUBMIT_DIR}/train.py" ${TRAIN_ARGS:-})
NODES="${SLURM_JOB_NUM_NODES:-1}"

if [ "${NODES}" -eq 1 ]; then
    # one node: torchrun starts one process per GPU on it. hops_probe.torchrun is
    # torchrun that passes the notice on to its workers (each in a session of its
    # own, which Slurm's signal to the batch script does not reach)
    exec "${PYTHON}" -m hops_probe.torchrun --nnodes=1 \
        --nproc-per-node="${SLURM_GPUS_ON_NODE:-1}" --master-port="$((20000 + SLURM_JOB_ID % 20000))" \
        "${TRAIN[@]}"
fi
# several nodes: one srun task per GPU of the job (its total is in AllocTRES),
# each bound to its own GPU; train.py finds the first node itself
gpus="$(scontrol show job "${SLURM_JOB_ID}" | grep -o 'gres/gpu=[0-9]*' | head -n 1 | cut -d= -f2)"
exec srun --ntasks="${gpus}" --gpus-per-task=1 --cpus-per-task="${SLURM_CPUS_PER_GPU:-2}" \
    "${PYTHON}" "${TRAIN[@]}"
