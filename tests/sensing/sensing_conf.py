"""Configuration shared by the sensing tests (the daemon tests' small cluster)."""

CONF = """
[slurm]
partitions = ["slow", "fast"]
[scheduler]
round_length_s = 10.0
queue_refresh_s = 1.0
restart_penalty_s = 1.0
profiling = {profiling}
profiling_iterations = 3
profiling_timeout_s = 5.0
[gpu_types.k80]
speed = 1.0
[gpu_types.a100]
speed = 4.0
[metrics]
address = ""
"""
