"""Cluster TOML: presets load, and bad files are refused with the offending table named."""

from __future__ import annotations

from pathlib import Path

import pytest

from hopsd.sim.cluster_file import ClusterFileError, load_cluster
from hopsd.sim.run import preset_path

GOOD = """
[gpu_types.A100]
b_link = 1e10
b_net = 1e9

[[node_groups]]
prefix = "a"
count = 2
gpu_type = "A100"
gpus = 8
data_factor = 2.0
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    return load_cluster(path)


def test_presets_have_the_papers_shapes() -> None:
    small = load_cluster(preset_path("paper-64.toml")).cluster
    assert small.total_gpus == 64
    assert small.gpus_of_type("RTX3090") == 16
    big = load_cluster(preset_path("paper-512.toml")).cluster
    assert big.total_gpus == 512
    assert len(big.nodes) == 64
    assert {t: big.gpus_of_type(t) for t in big.gpu_types} == {
        "GTX1080Ti": 128,
        "TitanXP": 128,
        "RTX3090": 128,
        "RTX3090-8G": 64,
        "RTX3090-10G": 64,
    }


def test_good_file_and_hidden_factors(tmp_path: Path) -> None:
    sim = _load(tmp_path, GOOD)
    assert [n.id for n in sim.cluster.nodes] == ["a00", "a01"]
    assert sim.data_factors == {"a00": 2.0, "a01": 2.0}


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (('gpu_type = "A100"', 'gpu_type = "H100"'), "node_groups[0]: unknown GPU type 'H100'"),
        (("count = 2", "count = 2.5"), "node_groups[0]: count must be an integer"),
        (("gpus = 8", "gpus = 0"), "count and gpus must be > 0"),
        (('prefix = "a"\n', ""), "node_groups[0]: missing 'prefix'"),
        (("b_net = 1e9", "b_net = -1"), "bandwidths must be > 0"),
        (("b_net = 1e9", "b_nett = 1"), "[gpu_types.A100] unknown key(s) ['b_nett']"),
        (("data_factor = 2.0", "data_factor = 'x'"), "data_factor must be a number"),
        (("[gpu_types.A100]", "[gpu_types.A100"), "not valid TOML"),
    ],
)
def test_bad_files(tmp_path: Path, change: tuple[str, str], needle: str) -> None:
    with pytest.raises(ClusterFileError) as info:
        _load(tmp_path, GOOD.replace(*change))
    assert needle in str(info.value)
    assert "c.toml" in str(info.value)


def test_missing_sections(tmp_path: Path) -> None:
    with pytest.raises(ClusterFileError, match="at least one \\[gpu_types"):
        _load(tmp_path, "")
    with pytest.raises(ClusterFileError, match="node_groups"):
        _load(tmp_path, "[gpu_types.A]\n")
