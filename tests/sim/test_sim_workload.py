"""Workload presets: the paper's shapes, seeded and reproducible."""

from __future__ import annotations

from collections import Counter

import pytest

from hopsd.sim.cluster_file import load_cluster
from hopsd.sim.run import build_truth, preset_path
from hopsd.sim.workload import PRESETS, generate, reference_rate


@pytest.fixture(scope="module")
def truth512():
    return build_truth(load_cluster(preset_path("paper-512.toml"), seed=0))


def test_paper_512_shape(truth512) -> None:
    jobs = generate(PRESETS["paper-512"], truth512, seed=0)
    assert len(jobs) == 500
    assert all(1 <= d <= 16 for j in jobs for d in j.demands)
    assert all(len(j.demands) <= 8 for j in jobs)
    assert all(j.model in truth512.models for j in jobs)
    # Poisson at 100 jobs/h: 500 arrivals take about 5 h.
    assert 4.0 * 3600 < jobs[-1].submit_time < 6.0 * 3600
    models = Counter(j.model for j in jobs)
    assert len(models) == 13


def test_size_classes_follow_the_mix(truth512) -> None:
    jobs = generate(PRESETS["paper-512"], truth512, seed=1)
    gpu_h = [j.total_samples / reference_rate(truth512, j.model) / 3600 for j in jobs]
    share_small = sum(h < 1 for h in gpu_h) / len(gpu_h)
    share_xl = sum(h > 50 for h in gpu_h) / len(gpu_h)
    assert 0.33 < share_small < 0.47
    assert 0.02 < share_xl < 0.09
    assert max(gpu_h) <= 80.01


def test_seeded(truth512) -> None:
    spec = PRESETS["paper-64"]
    assert generate(spec, truth512, 7) == generate(spec, truth512, 7)
    assert generate(spec, truth512, 7) != generate(spec, truth512, 8)
