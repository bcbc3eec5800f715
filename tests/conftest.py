"""Suite-wide pytest configuration.

Live tests need the Slurm test cluster (``docker/cluster.sh up`` exports
``SLURM_CONF``) or PostgreSQL on 127.0.0.1:5432; they skip with the reason when
run outside ``scripts/test.sh``, which brings up both before running pytest.
"""
