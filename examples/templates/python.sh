#!/bin/bash
# A plain Python training job under hops: one process, on the GPUs hops gives it.
#
#   hops submit python.sh --gpus 1,2 --samples 1M --batch-size 32 --lr 0.05 --lr-scale linear
#
# hops chooses the GPU type, the node and the GPU count of every run from the
# counts --gpus allows, and may move the job between runs: train.py reads the
# count (probe.gpus), checkpoints on hops's notice and resumes. Keep --gpus to
# counts one process can use (one node); for several nodes see srun.sh.
# Your #SBATCH lines keep working, except --gres/--gpus (hops sets the GPUs).
#SBATCH --job-name=train
#SBATCH --cpus-per-gpu=2
#SBATCH --output=%x-%j.out
#SBATCH --open-mode=append      # keep the output of every run in one file
#SBATCH --time=60
set -euo pipefail

# The Python of your training environment (with hops-probe installed in it).
PYTHON="${PYTHON:-python3}"
exec "${PYTHON}" "${SLURM_SUBMIT_DIR}/train.py"
