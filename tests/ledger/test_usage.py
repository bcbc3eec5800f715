"""Usage buckets and decayed usage, with hand-worked numbers."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hopsd.core.errors import InvalidInputError
from hopsd.ledger.usage import (
    add_usage,
    bucket_start,
    decayed_usage,
    decayed_usage_by_owner,
    usage_between,
)

H = 3600.0


def test_bucket_start_aligns_to_the_bucket() -> None:
    assert bucket_start(0.0) == 0.0
    assert bucket_start(3599.9) == 0.0
    assert bucket_start(3600.0) == 3600.0
    assert bucket_start(7300.0, bucket_s=600.0) == 7200.0


def test_usage_accumulates_per_bucket(Sessions: sessionmaker[Session]) -> None:
    with Sessions.begin() as s:
        add_usage(s, "alice", "vision", at=100.0, gpu_s=300.0, gpu_s_norm=150.0)
        add_usage(s, "alice", "vision", at=3500.0, gpu_s=200.0, gpu_s_norm=100.0)
        add_usage(s, "alice", "vision", at=3700.0, gpu_s=50.0, gpu_s_norm=50.0)
        add_usage(s, "bob", "nlp", at=200.0, gpu_s=10.0, gpu_s_norm=20.0)
    with Sessions() as s:
        first_hour = usage_between(s, 0.0, H)
        assert first_hour["alice"].gpu_s == 500.0 and first_hour["alice"].gpu_s_norm == 250.0
        assert first_hour["bob"].gpu_s == 10.0
        assert usage_between(s, 0.0, 2 * H, by="account")["vision"].gpu_s == 550.0
        assert usage_between(s, H, 2 * H) == {"alice": usage_between(s, H, 2 * H)["alice"]}


def test_decayed_usage_hand_checked(Sessions: sessionmaker[Session]) -> None:
    # Buckets end at 1 h and 2 h; at now = 3 h with a 1 h half-life their ages are
    # 2 h and 1 h, so weights 1/4 and 1/2:  1000/4 + 400/2 = 450 (raw).
    # Normalised amounts 800 and 200: 800/4 + 200/2 = 300.
    with Sessions.begin() as s:
        add_usage(s, "alice", "vision", at=10.0, gpu_s=1000.0, gpu_s_norm=800.0)
        add_usage(s, "alice", "vision", at=H + 10.0, gpu_s=400.0, gpu_s_norm=200.0)
        add_usage(s, "bob", "vision", at=H + 20.0, gpu_s=100.0, gpu_s_norm=100.0)
    with Sessions() as s:
        raw = decayed_usage(s, now=3 * H, half_life_s=H, normalised=False)
        assert raw["alice"] == pytest.approx(450.0)
        assert raw["bob"] == pytest.approx(50.0)
        norm = decayed_usage(s, now=3 * H, half_life_s=H)
        assert norm["alice"] == pytest.approx(300.0)
        by_account = decayed_usage(s, now=3 * H, half_life_s=H, by="account", normalised=False)
        assert by_account == {"vision": pytest.approx(500.0)}
        # A bucket that has not ended yet counts fully.
        assert decayed_usage(s, now=H, half_life_s=H, normalised=False)["alice"] == 1400.0


def test_decay_weight_and_validation(Sessions: sessionmaker[Session]) -> None:
    with Sessions() as s:
        with pytest.raises(InvalidInputError):
            decayed_usage(s, now=0.0, half_life_s=0.0)
        with pytest.raises(InvalidInputError):
            add_usage(s, "a", "b", at=0.0, gpu_s=-1.0, gpu_s_norm=0.0)
        with pytest.raises(InvalidInputError):
            usage_between(s, 0.0, 1.0, by="team")  # type: ignore[arg-type]


def test_ancient_usage_weighs_nothing_and_never_fails(Sessions: sessionmaker[Session]) -> None:
    # 0.5 ** 2000 underflows: Python gives 0.0, PostgreSQL's power() raises. A bucket
    # a thousand half-lives old counts for nothing on both backends.
    with Sessions.begin() as s:
        add_usage(s, "alice", "vision", at=10.0, gpu_s=1000.0, gpu_s_norm=1000.0)
        add_usage(s, "bob", "nlp", at=2000 * H + 10.0, gpu_s=100.0, gpu_s_norm=100.0)
    with Sessions() as s:
        users = decayed_usage(s, now=2001 * H, half_life_s=H)
        assert users["alice"] == 0.0 and users["bob"] == pytest.approx(100.0)
        by_user, by_account = decayed_usage_by_owner(s, now=2001 * H, half_life_s=H)
        assert by_user == users
        assert by_account == {"vision": 0.0, "nlp": pytest.approx(100.0)}


def test_usage_halves_every_half_life_in_sql(Sessions: sessionmaker[Session]) -> None:
    with Sessions.begin() as s:
        add_usage(s, "u0", "a", at=10.0, gpu_s=1.0, gpu_s_norm=1000.0)
    end = H  # the bucket ends at 1 h
    with Sessions() as s:
        for age in (0.5, 1.0, 3.7, 40.0, 999.0):
            users, _ = decayed_usage_by_owner(s, now=end + age * H, half_life_s=H)
            assert users["u0"] == pytest.approx(1000.0 * 0.5**age, rel=1e-9)
