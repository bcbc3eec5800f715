#!/bin/bash
# A plain Python training job under hops: one process.
#
#   hops submit python.sh --gpus 1 --samples 1M --batch-size 32
#
# hops chooses the GPU type and the node of every run, and may move the job
# between runs: train.py checkpoints on hops's notice and resumes. This script
# starts one process, on the first node of the allocation. hops may spread a
# run of several GPUs over servers (a100n1:1,a100n2:1), so a job that can use
# more than one GPU should start a process per GPU: torchrun.sh or srun.sh.
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
