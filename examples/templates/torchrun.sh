#!/bin/bash
# A PyTorch DDP job launched by torchrun under hops:
#
#   hops submit torchrun.sh --gpus 1,2,4 --samples 400000 --batch-size 32 \
#       --lr 0.05 --lr-scale linear --model cnn
#
# On one node, torchrun starts one process per GPU. hops_probe.torchrun is
# torchrun that passes hops's notice on to its workers (torchrun puts each in a
# session of its own, which Slurm's signal does not reach). hops may also place a
# run on several servers (e.g. a100n1:3,a100n2:1): then srun starts one task per
# GPU, and hops_probe.pytorch.world() gives each its rank. train.py is yours:
# examples/pytorch/train.py is a complete one (DDP, checkpoint on notice,
# resume on any world size).
#SBATCH --job-name=ddp
#SBATCH --cpus-per-gpu=2        # CPU threads of each rank
#SBATCH --output=%x-%j.out
#SBATCH --open-mode=append
#SBATCH --time=60
set -euo pipefail

PYTHON="${PYTHON:-python3}"
TRAIN=("${SLURM_SUBMIT_DIR}/train.py" ${TRAIN_ARGS:-})

if [ "${SLURM_JOB_NUM_NODES:-1}" -eq 1 ]; then
    exec "${PYTHON}" -m hops_probe.torchrun --nnodes=1 \
        --nproc-per-node="${SLURM_GPUS_ON_NODE:-1}" \
        --master-port="$((20000 + SLURM_JOB_ID % 20000))" "${TRAIN[@]}"
fi
# several nodes: one task per GPU of the job (its total is in AllocTRES)
gpus="$(scontrol show job "${SLURM_JOB_ID}" | grep -o 'gres/gpu=[0-9]*' | head -n 1 | cut -d= -f2)"
exec srun --ntasks="${gpus}" --gpus-per-task=1 --cpus-per-task="${SLURM_CPUS_PER_GPU:-2}" \
    "${PYTHON}" "${TRAIN[@]}"
