"""The eqs. 1-5 answers shared across rounds: kept while asked for, forgotten after."""

from __future__ import annotations

from dataclasses import fields, replace

from hopsd.core.theory_answers import TheoryAnswers, value_key
from hopsd.core.throughput import Mixture, PhaseProfile

KEY = (1e8, 32, 4, 1, 100.0, 10.0, 0.2)


def profile(t_f: float) -> PhaseProfile:
    return PhaseProfile(t_f, 0.2, 0.05, 1, Mixture.constant(0.1), Mixture.constant(0.0))


def test_an_equal_profile_finds_the_answers_of_the_first() -> None:
    answers = TheoryAnswers(max_profiles=100, rounds_per_generation=10)
    answers.table(profile(0.1))[KEY] = 42.0
    assert answers.table(profile(0.1)) == {KEY: 42.0}
    assert answers.table(profile(0.2)) == {}


def test_a_profile_asked_for_every_round_outlives_any_number_of_generations() -> None:
    answers = TheoryAnswers(max_profiles=100, rounds_per_generation=3)
    answers.table(profile(0.1))[KEY] = 42.0
    for _ in range(30):
        answers.new_round()
        assert answers.table(profile(0.1)) == {KEY: 42.0}


def test_a_profile_no_round_asks_for_is_forgotten_after_two_generations() -> None:
    answers = TheoryAnswers(max_profiles=100, rounds_per_generation=3)
    answers.table(profile(0.9))[KEY] = 7.0  # a job that ends
    for _ in range(6):
        answers.new_round()
        answers.table(profile(0.1))
    assert len(answers) == 1
    assert answers.table(profile(0.9)) == {}


def test_the_table_never_holds_more_than_two_generations_of_profiles() -> None:
    answers = TheoryAnswers(max_profiles=50, rounds_per_generation=1000)
    for i in range(1000):
        answers.table(profile(0.001 * (i + 1)))
        assert len(answers) <= 100


def test_the_value_key_changes_with_every_field_of_a_profile() -> None:
    """Two profiles share answers only when every number is equal: a field the key left
    out (one added later, say) would hand one profile another's throughput."""
    base = PhaseProfile(0.1, 0.2, 0.05, 1, Mixture(0.5, 0.1, 0.01, 0.3, 0.02),
                        Mixture(0.6, 0.02, 0.001, 0.04, 0.003))  # fmt: skip
    keys = {value_key(base)}
    for f in fields(PhaseProfile):
        value = getattr(base, f.name)
        if isinstance(value, Mixture):
            for g in fields(Mixture):
                changed = replace(value, **{g.name: getattr(value, g.name) * 0.5})
                keys.add(value_key(replace(base, **{f.name: changed})))
        else:
            keys.add(value_key(replace(base, **{f.name: 2 if f.name == "pattern" else value * 2})))
    assert len(keys) == 1 + (len(fields(PhaseProfile)) - 2) + 2 * len(fields(Mixture))
