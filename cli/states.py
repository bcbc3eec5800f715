"""Job states as squeue and sacct spell them, mapped onto hops's own states.

``-t/--state`` takes hops's names (``queued``, ``done``...) and Slurm's names
and codes (``PD``, ``R``, ``PENDING``, ``COMPLETED``...), any case, comma
lists. A Slurm word selects the hops states a job is in while Slurm would
show it that way:

* ``PENDING``/``PD``: submitted, queued, preempted, requeued (hops holds
  waiting jobs pending in Slurm);
* ``RUNNING``/``R``: running, profiling (a profiling run holds GPUs);
* ``PREEMPTED``/``PR`` and ``REQUEUE_HOLD``/``RH``: preempted (hops preempts
  by requeue-hold); ``REQUEUED``/``RQ``: requeued;
* ``COMPLETED``/``CD``: done; ``CANCELLED``/``CA``: cancelled;
* ``FAILED``/``F``, ``TIMEOUT``/``TO``, ``NODE_FAIL``/``NF``,
  ``OUT_OF_MEMORY``/``OOM``, ``BOOT_FAIL``/``BF``, ``DEADLINE``/``DL``:
  failed (hops records every end but COMPLETED and CANCELLED as failed);
* ``all``: every state.

Slurm states hops jobs never are in as far as the ledger knows (``CG``,
``S``, ``CF``...) are accepted and select no job. ``hops history`` lists ended
jobs only, so there a word selects the state the job ended in
(``PREEMPTED`` without a requeue is an end hops records as failed), and a
state no ended job has is a usage error. Needs no typer (``hops status``
runs without it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

HOPS_STATES = (
    "submitted",
    "profiling",
    "queued",
    "running",
    "preempted",
    "requeued",
    "done",
    "failed",
    "cancelled",
)
FINISHED = ("done", "failed", "cancelled")
_WAITING = frozenset({"submitted", "queued", "preempted", "requeued"})


@dataclass(frozen=True)
class SlurmState:
    """One of Slurm's job states: its name and code, and the hops states it selects.

    ``live``: while the job waits or runs (``hops status``); ``ended``: once it
    has ended (``hops history``).
    """

    name: str
    code: str
    live: frozenset[str] = frozenset()
    ended: frozenset[str] = frozenset()


def _s(name: str, code: str, live: Iterable[str] = (), ended: Iterable[str] = ()) -> SlurmState:
    return SlurmState(name, code, frozenset(live), frozenset(ended))


#: Every job state squeue and sacct name (Slurm 22.05 to 24.11), with its code.
SLURM_STATES = (
    _s("PENDING", "PD", _WAITING),
    _s("RUNNING", "R", ("running", "profiling")),
    _s("SUSPENDED", "S"),
    _s("COMPLETING", "CG"),
    _s("COMPLETED", "CD", (), ("done",)),
    _s("CANCELLED", "CA", (), ("cancelled",)),
    _s("FAILED", "F", (), ("failed",)),
    _s("TIMEOUT", "TO", (), ("failed",)),
    _s("NODE_FAIL", "NF", (), ("failed",)),
    _s("OUT_OF_MEMORY", "OOM", (), ("failed",)),
    _s("BOOT_FAIL", "BF", (), ("failed",)),
    _s("DEADLINE", "DL", (), ("failed",)),
    _s("PREEMPTED", "PR", ("preempted",), ("failed",)),
    _s("REQUEUED", "RQ", ("requeued",)),
    _s("REQUEUE_HOLD", "RH", ("preempted",)),
    _s("REQUEUE_FED", "RF"),
    _s("RESV_DEL_HOLD", "RD"),
    _s("SPECIAL_EXIT", "SE"),
    _s("CONFIGURING", "CF"),
    _s("RESIZING", "RS"),
    _s("REVOKED", "RV"),
    _s("SIGNALING", "SI"),
    _s("STAGE_OUT", "SO"),
    _s("STOPPED", "ST"),
)
_BY_WORD = {w.lower(): s for s in SLURM_STATES for w in (s.name, s.code)}


class UnknownState(ValueError):
    """A state word neither hops nor Slurm knows, or one ``hops history`` cannot select."""


def hops_states(words: Iterable[str], *, ended_only: bool = False) -> frozenset[str]:
    """The hops states the words select (``ended_only``: as ``hops history`` reads them).

    Raises :class:`UnknownState` with one line naming the word and what is accepted.
    """
    selected: set[str] = set()
    for word in words:
        selected |= _one(word, ended_only)
    return frozenset(selected)


def _one(word: str, ended_only: bool) -> frozenset[str]:
    key = word.strip().lower()
    if key == "all":
        return frozenset(FINISHED if ended_only else HOPS_STATES)
    slurm = _BY_WORD.get(key)
    if slurm is None and key in HOPS_STATES:
        if ended_only and key not in FINISHED:
            raise UnknownState(_not_ended(word))
        return frozenset({key})
    if slurm is None:
        raise UnknownState(
            f"unknown state {word.strip()}; known: {','.join(HOPS_STATES)}, "
            "Slurm's names and codes (PD,R,CD,CA,F,TO,PR,...) or all"
        )
    if ended_only:
        if not slurm.ended:
            raise UnknownState(_not_ended(word))
        return slurm.ended
    return slurm.live or slurm.ended


def _not_ended(word: str) -> str:
    return (
        f"state {word.strip()} is not one an ended job has; hops history lists ended jobs: "
        "done (CD), failed (F,TO,NF,OOM,BF,DL,PR), cancelled (CA); hops status shows the others"
    )
