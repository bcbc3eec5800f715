"""hops: heterogeneity-aware, fair deep-learning job scheduling layered over Slurm."""

__version__ = "0.1.0"
