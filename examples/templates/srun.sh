#!/bin/bash
# A data-parallel job whose ranks srun starts, on one node or across nodes, under hops:
#
#   hops submit srun.sh --gpus 2,4,8 --samples 1M --batch-size 64 --model resnet50
#
# hops places every run on the GPU type, nodes and GPU count it chooses, evenly
# or not (a100n1:3,a100n2:1). srun starts one task per GPU, each bound to its
# GPU; every rank reads its rank, world size and the first node's address from
# Slurm (hops_probe.pytorch.world() and rendezvous() do this for PyTorch).
# hops submit adds `trap '' USR1` before the first command, so this shell and
# srun outlive hops's notice, which reaches every rank: each rank's probe hears
# it, the ranks agree to stop after the same step (hops_probe.pytorch.stop_for_notice)
# and rank 0 checkpoints.
#SBATCH --job-name=srun-ddp
#SBATCH --cpus-per-gpu=2
#SBATCH --output=%x-%j.out
#SBATCH --open-mode=append
#SBATCH --time=60
set -euo pipefail

PYTHON="${PYTHON:-python3}"
gpus="$(scontrol show job "${SLURM_JOB_ID}" | grep -o 'gres/gpu=[0-9]*' | head -n 1 | cut -d= -f2)"
exec srun --ntasks="${gpus:-1}" --gpus-per-task=1 --cpus-per-task="${SLURM_CPUS_PER_GPU:-2}" \
    "${PYTHON}" "${SLURM_SUBMIT_DIR}/train.py" ${TRAIN_ARGS:-}
