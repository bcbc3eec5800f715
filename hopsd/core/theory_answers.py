"""Answers of eqs. 1-5 shared across planning rounds, keyed by the profile's value.

A profile is immutable, and successive planning calls build a new
:class:`~hopsd.core.estimator.Estimator` each; hopsd also reads every profile
anew from its ledger each tick, as new but equal objects. Without a table that
outlives one estimator, the same profiles would go through eqs. 1-5 again for
every job, GPU type and shape, round after round (about 125,000 estimates a
round at 10,000 jobs on 8,192 GPUs).

The table is kept in two generations so that it forgets what no round asks for
any more (the profiles of jobs that ended) without a clock: a new generation
starts every :data:`ROUNDS_PER_GENERATION` rounds, or when the current one holds
:data:`MAX_PROFILES` profiles; a profile asked for during a generation is
carried into it, and the generation before the last is dropped whole.

Within a generation a profile object is found again by its identity, so its
value's hash (every field, the two mixtures included) is computed once per
object and generation, not once per lookup.
"""

from __future__ import annotations

from hopsd.core.throughput import PhaseProfile

#: Inputs of eqs. 1-5 besides the profile: params, batch, GPUs, nodes, B_link, B_net, overlap.
TheoryKey = tuple[float, int, int, int, float, float, float]

#: A profile's value as one flat tuple of numbers: hashed and compared in C, where the
#: dataclasses' own hash and equality go through three Python calls each.
ProfileKey = tuple[float, ...]

#: Estimators built before a generation ends: a job still running is asked for
#: in every round, so only profiles no round needed for this long are forgotten.
ROUNDS_PER_GENERATION = 64

#: Profiles one generation holds at most (about 0.6 kB each with their answers):
#: every GPU type of ten thousand profiled jobs.
MAX_PROFILES = 65_536


class TheoryAnswers:
    """Per profile value, the eqs. 1-5 answers computed for it so far."""

    def __init__(self, max_profiles: int, rounds_per_generation: int) -> None:
        self._max_profiles = max_profiles
        self._rounds_per_generation = rounds_per_generation
        self._current: dict[ProfileKey, dict[TheoryKey, float]] = {}
        self._previous: dict[ProfileKey, dict[TheoryKey, float]] = {}
        # entries hold the profile, so an identity is not reused while its entry lives
        self._by_identity: dict[int, tuple[PhaseProfile, dict[TheoryKey, float]]] = {}
        self._rounds = 0

    def new_round(self) -> None:
        """Count one planning round; every so many start a new generation."""
        self._rounds += 1
        if self._rounds >= self._rounds_per_generation:
            self._start_generation()

    def table(self, profile: PhaseProfile) -> dict[TheoryKey, float]:
        """The answers for this profile's value (empty at first); the caller fills it."""
        entry = self._by_identity.get(id(profile))
        if entry is not None and entry[0] is profile:
            return entry[1]
        key = value_key(profile)
        answers = self._current.get(key)
        if answers is None:
            answers = self._previous.pop(key, None)
            if answers is None:
                answers = {}
            if len(self._current) >= self._max_profiles:
                self._start_generation()
            self._current[key] = answers
        if len(self._by_identity) >= self._max_profiles:
            # equal profiles read anew each tick would otherwise keep the old objects alive
            self._by_identity = {}
        self._by_identity[id(profile)] = (profile, answers)
        return answers

    def __len__(self) -> int:
        """Profiles held in both generations."""
        return len(self._current) + len(self._previous)

    def _start_generation(self) -> None:
        self._previous = self._current
        self._current = {}
        self._by_identity = {}
        self._rounds = 0


def value_key(profile: PhaseProfile) -> ProfileKey:
    """Every number of the profile, in a fixed order: equal keys, equal profiles."""
    data, wait = profile.data, profile.sync_wait
    return (
        profile.t_f,
        profile.t_b,
        profile.t_u,
        profile.pattern,
        data.p_hit,
        data.mu_hit,
        data.sigma_hit,
        data.mu_miss,
        data.sigma_miss,
        wait.p_hit,
        wait.mu_hit,
        wait.sigma_hit,
        wait.mu_miss,
        wait.sigma_miss,
    )


#: The one table every estimator of this process shares.
SHARED_THEORY_ANSWERS = TheoryAnswers(MAX_PROFILES, ROUNDS_PER_GENERATION)
