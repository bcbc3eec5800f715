"""``[ledger] retention_days``: default, parsed, negative refused naming the key."""

from __future__ import annotations

import pytest

from hopsd.config import ConfigError, parse_config


def test_retention_days_default_and_override() -> None:
    assert parse_config("").retention_days == 90.0
    assert parse_config("[ledger]\nretention_days = 7\n").retention_days == 7.0
    assert parse_config("[ledger]\nretention_days = 0\n").retention_days == 0.0


def test_negative_retention_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"ledger\.retention_days"):
        parse_config("[ledger]\nretention_days = -1\n")
