"""Fair share has one owner: the factor hopsd applies is the one `hops fairness` shows."""

from __future__ import annotations

import pytest

from hopsd.core.fairshare import fair_share, split_shares, standings


def test_shares_split_into_users_and_accounts() -> None:
    users, accounts = split_shares({"alice": 2.0, "account:physics": 3.0, "bob": 1})
    assert users == {"alice": 2.0, "bob": 1.0} and accounts == {"physics": 3.0}


def test_standings_carry_the_factor_the_daemon_applies() -> None:
    usage = {"physics": 300.0, "bio": 100.0}
    owners = [("ann", "physics"), ("ben", "bio")]
    shares = {"account:physics": 3.0}  # physics is entitled to 3/4: exactly at share
    fs = fair_share({}, usage, owners, shares, weight=1.0)
    _, account_shares = split_shares(shares)
    shown = {s.name: s for s in standings(usage, account_shares, ["physics", "bio"])}
    assert shown["physics"].fair_share == pytest.approx(0.75)
    assert shown["physics"].ratio == pytest.approx(1.0)
    for name, standing in shown.items():
        assert standing.factor == pytest.approx(fs.accounts[name])
    assert shown["physics"].factor == pytest.approx(0.5)  # at share: 2 ** -1
    # without the account share physics would look twice over its share
    unweighted = {s.name: s for s in standings(usage, {}, ["physics", "bio"])}
    assert unweighted["physics"].ratio == pytest.approx(1.5)
