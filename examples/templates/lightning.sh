#!/bin/bash
# A PyTorch Lightning job under hops, on one node or several:
#
#   hops submit lightning.sh --gpus 1,2,4 --samples 400000 --batch-size 32 \
#       --lr 0.02 --lr-scale linear --model cnn
#
# On one node Lightning starts a process per GPU itself. On several, srun starts
# one task per GPU (any count per server) and each task is a Lightning node of
# one device: hops_probe.lightning.environment() and layout() give Trainer its
# plugins, devices and num_nodes. hops_probe.lightning.HopsCallback reports to
# hopsd and checkpoints on hops's notice; Lightning's own SLURM requeue stays
# off (hops requeues and places the job). examples/pytorch/train_lightning.py
# is a complete train_lightning.py.
#SBATCH --job-name=lightning
#SBATCH --cpus-per-gpu=2
#SBATCH --output=%x-%j.out
#SBATCH --open-mode=append
#SBATCH --time=60
set -euo pipefail

PYTHON="${PYTHON:-python3}"
TRAIN=("${SLURM_SUBMIT_DIR}/train_lightning.py" ${TRAIN_ARGS:-})

if [ "${SLURM_JOB_NUM_NODES:-1}" -eq 1 ]; then
    exec "${PYTHON}" "${TRAIN[@]}"
fi
gpus="$(scontrol show job "${SLURM_JOB_ID}" | grep -o 'gres/gpu=[0-9]*' | head -n 1 | cut -d= -f2)"
exec srun --ntasks="${gpus}" --gpus-per-task=1 --cpus-per-task="${SLURM_CPUS_PER_GPU:-2}" \
    "${PYTHON}" "${TRAIN[@]}"
