"""hopsd: the daemon that schedules hops-tagged Slurm jobs with the Hops core."""
