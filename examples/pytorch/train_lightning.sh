#!/bin/bash
# The example's CNN trained with PyTorch Lightning under hops, on one node or several:
#
#   hops submit train_lightning.sh --gpus 1,2,4 --samples 400000 --batch-size 32 \
#       --lr 0.02 --lr-scale linear --model cnn
#
# hops picks the GPU type, the nodes and the GPU count of every run. On one node
# Lightning starts one process per GPU itself; on several, srun starts one task
# per GPU (any count per server, e.g. a100n1:3,a100n2:1) and each task is one
# Lightning node of one device (hops_probe.lightning.layout). train_lightning.py uses
# hops_probe.lightning: a callback that checkpoints on hops's notice, and
# Lightning's SLURM support without its own requeue (hops requeues and places).
#SBATCH --job-name=cnn-lightning
#SBATCH --cpus-per-gpu=2        # CPU threads of each rank
#SBATCH --output=%x-%j.out
#SBATCH --open-mode=append      # keep the output of every run
#SBATCH --time=60
set -euo pipefail

PYTHON="${PYTHON:-python3}"
# train_lightning.py takes its size and per-GPU batch from hops submit
TRAIN=("${SLURM_SUBMIT_DIR}/train_lightning.py" ${TRAIN_ARGS:-})

if [ "${SLURM_JOB_NUM_NODES:-1}" -eq 1 ]; then
    exec "${PYTHON}" "${TRAIN[@]}"   # Lightning starts a process per GPU of this node
fi
gpus="$(scontrol show job "${SLURM_JOB_ID}" | grep -o 'gres/gpu=[0-9]*' | head -n 1 | cut -d= -f2)"
exec srun --ntasks="${gpus}" --gpus-per-task=1 --cpus-per-task="${SLURM_CPUS_PER_GPU:-2}" \
    "${PYTHON}" "${TRAIN[@]}"
