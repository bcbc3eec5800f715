"""hopsd.slurm"""
