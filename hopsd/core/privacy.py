"""What a user may read of other users' work: Slurm's ``PrivateData`` rules, once.

hops shows what Slurm would show. With ``PrivateData=jobs`` a user sees only
their own jobs (``squeue`` hides the others); ``usage`` hides other users'
usage (``sshare``); ``accounts`` hides other users' account names. Operators
and administrators (root, SlurmUser, ``AdminLevel=Operator|Administrator``)
see everything, as in Slurm. The ledger's private copies, the status page and
its JSON apply these predicates and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The viewer of the status page and its JSON: nobody in particular.
ANONYMOUS = ""


@dataclass(frozen=True, slots=True)
class PrivateData:
    """The ``PrivateData`` flags hops honours (Slurm has more; they hide nothing hops shows)."""

    jobs: bool = False
    usage: bool = False
    accounts: bool = False

    @classmethod
    def parse(cls, text: str) -> PrivateData:
        """``accounts,jobs,usage`` as ``scontrol show config`` prints it (``none``: none)."""
        flags = {f.strip().lower() for f in text.split(",")}
        return cls("jobs" in flags, "usage" in flags, "accounts" in flags)

    @property
    def any(self) -> bool:
        return self.jobs or self.usage or self.accounts


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who reads: a user name (``ANONYMOUS`` for nobody), and whether Slurm trusts them."""

    user: str
    privileged: bool = False


def sees_job(rules: PrivateData, viewer: Viewer, owner: str) -> bool:
    """Whether ``viewer`` may see a job of ``owner`` at all."""
    return viewer.privileged or not rules.jobs or (bool(viewer.user) and owner == viewer.user)


def sees_usage(rules: PrivateData, viewer: Viewer, user: str) -> bool:
    """Whether ``viewer`` may see ``user``'s usage (attained service, fair-share standing)."""
    return viewer.privileged or not rules.usage or (bool(viewer.user) and user == viewer.user)


def sees_account(rules: PrivateData, viewer: Viewer, owner: str) -> bool:
    """Whether ``viewer`` may see which account ``owner``'s work is charged to."""
    return viewer.privileged or not rules.accounts or (bool(viewer.user) and owner == viewer.user)
