"""hops.conf's [policies.NAME] tables: names checked by every loader, keys by hopsd's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_dists import IDLE, write_dist

from hopsd.config import ConfigError, load_daemon_config, parse_config, policy_settings
from hopsd.core.policies.common import BaselineSettings
from hopsd.core.policies.fifo import FifoSettings
from hopsd.core.policies.hops import HopsSettings


def _daemon(tmp_path: Path, text: str) -> object:
    path = tmp_path / "hops.conf"
    path.write_text(text)
    return load_daemon_config(str(path))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[policies.fifo]\nbackfil = false\n",
         "policies.fifo.backfil: unknown key (known: backfill)"),
        ('[policies.fifo]\nbackfill = "no"\n',
         "policies.fifo.backfill: expected bool, got str 'no'"),
        ("[policies.hops]\nlam = inf\n", "policies.hops.lam: must be a finite number, got inf"),
        ("[policies.hops]\nlam = -1.0\n", "policies.hops.lam: must be >= 0, got -1.0"),
        ('[policies.sia-arrival]\nqueue_order = "lifo"\n',
         "policies.sia-arrival.queue_order: unknown 'lifo'"),
    ],
)  # fmt: skip
def test_hopsd_refuses_a_bad_table_in_one_line_naming_the_key(
    tmp_path: Path, text: str, says: str
) -> None:
    """Every table is checked, also of a policy not configured (here hops plans)."""
    with pytest.raises(ConfigError, match=f"^{re.escape(says)}") as caught:
        _daemon(tmp_path, text)
    assert "\n" not in str(caught.value)


def test_the_plain_loader_checks_names_and_shapes_but_imports_no_policy() -> None:
    parse_config("[policies.fifo]\nbackfil = false\n")  # the CLI's loader: keys are hopsd's
    for text, says in (
        ("[policies.lifo]\nx = 1\n", "policies.lifo: unknown policy (known: fifo, gavel"),
        ("policies = 3\n", "[policies]: expected one table per policy"),
        ("[policies]\nfifo = 1\n", "policies.fifo: expected a table"),
    ):
        with pytest.raises(ConfigError, match=re.escape(says)):
            parse_config(text)


def test_each_policy_gets_its_table_over_its_own_defaults() -> None:
    config = parse_config(
        '[scheduler]\npolicy = "hops-ftf"\n[policies.hops-ftf]\nlam = 3\n'
        '[policies.gavel]\nqueue_order = "arrival"\n'
    )
    assert policy_settings(config) == HopsSettings("ftf", 3.0)  # the variant's priority stays
    assert policy_settings(config, "gavel") == BaselineSettings("arrival")
    assert policy_settings(config, "fifo") == FifoSettings(backfill=True)  # no table: defaults


def test_a_plugin_s_table_is_checked_by_its_own_dataclass(tmp_path: Path, site_dir: Path) -> None:
    write_dist(site_dir, "hops-idle", {"idle": "idle_policy:SPEC"}, {"idle_policy": IDLE})
    head = '[scheduler]\npolicy = "idle"\n[policies.idle]\n'
    with pytest.raises(ConfigError, match=r"^policies\.idle\.level: expected int, got float 1\.5"):
        _daemon(tmp_path, head + "level = 1.5\n")
    config = _daemon(tmp_path, head + 'note = "calm"\nweight = 2\n')
    own = policy_settings(config)  # type: ignore[arg-type]
    assert (own.note, own.level, own.weight) == ("calm", 1, 2.0)  # type: ignore[attr-defined]


def test_a_plugin_that_does_not_load_stops_hopsd_naming_the_key(
    tmp_path: Path, site_dir: Path
) -> None:
    write_dist(site_dir, "hops-idle", {"idle": "idle_gone:SPEC"})
    parse_config('[scheduler]\npolicy = "idle"\n')  # known by name: the CLI is not stopped
    with pytest.raises(ConfigError, match=r"^scheduler\.policy: policy 'idle' \(idle_gone:SPEC"):
        _daemon(tmp_path, '[scheduler]\npolicy = "idle"\n')
