"""hops: heterogeneity-aware, fair deep-learning job scheduling layered over Slurm."""

try:  # written by setuptools-scm from the git tag when hops is built or installed
    from hopsd._version import version as __version__
except ImportError:  # a checkout used without installing it
    __version__ = "0+unknown"
