"""The eqs. 1-5 answers shared across rounds: kept while asked for, forgotten after."""

from __future__ import annotations

from hopsd.core.theory_answers import TheoryAnswers
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
