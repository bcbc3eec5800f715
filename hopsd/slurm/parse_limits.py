"""Slurm's GPU limits and fair shares, read from ``sacctmgr`` and ``sshare``.

A centre caps GPUs per account, per user or per QOS in Slurm's accounting
database (``GrpTRES``, ``MaxTRES``, ``MaxTRESPerUser``...). Slurm keeps a job
pending past such a limit however free the GPUs are, so hops must plan within
them, and it reads them here. The association tree's shares are the centre's
fair-share policy, read the same way so hops.conf need not repeat them.

Only the untyped ``gres/gpu`` count is read; a typed limit
(``gres/gpu:a100=2``) is not one hops plans with.
"""

from __future__ import annotations

from dataclasses import dataclass

from hopsd.slurm.errors import SlurmParseError

#: ``sacctmgr show assoc`` columns, in this order.
ASSOC_FIELDS = ("Account", "User", "Partition", "GrpTRES", "MaxTRES", "QOS", "ParentName")
#: ``sacctmgr show qos`` columns, in this order.
QOS_FIELDS = ("Name", "GrpTRES", "MaxTRESPU", "MaxTRESPA", "MaxTRES")
#: ``sshare`` columns, in this order.
SHARE_FIELDS = ("Account", "User", "RawShares", "NormShares")


@dataclass(frozen=True, slots=True)
class AssocLimit:
    """One association: an account (``user`` empty) or a user within an account.

    ``grp_gpus`` caps the GPUs all the association's running jobs hold together,
    ``job_gpus`` each job's; None: no limit set on this row (a user's row
    inherits an unset ``MaxTRES`` from its account, which :func:`job_caps` applies).
    """

    account: str
    user: str
    partition: str
    grp_gpus: int | None
    job_gpus: int | None
    qos: tuple[str, ...] = ()
    #: An account's parent account (empty on user rows and on ``root``): a parent's
    #: limits cover its sub-accounts' jobs too.
    parent: str = ""


@dataclass(frozen=True, slots=True)
class QosLimit:
    """One QOS's GPU limits: in total, per user, per account, per job (None: unset)."""

    name: str
    grp_gpus: int | None
    user_gpus: int | None
    account_gpus: int | None
    job_gpus: int | None


@dataclass(frozen=True)
class SlurmLimits:
    """Every GPU limit in Slurm's accounting database."""

    assocs: tuple[AssocLimit, ...] = ()
    qos: tuple[QosLimit, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareRow:
    """One node of the association tree as ``sshare`` lists it: an account or a user in one."""

    account: str
    user: str
    raw_shares: float | None


def tres_gpus(text: str) -> int | None:
    """The ``gres/gpu`` count of a TRES string (``cpu=4,gres/gpu=2``); None when absent."""
    for part in text.split(","):
        name, _, value = part.strip().partition("=")
        if name == "gres/gpu":
            if not value.isdigit():
                raise SlurmParseError(f"bad GPU count in TRES {text!r}")
            return int(value)
    return None


def _rows(text: str, fields: tuple[str, ...], what: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split("|")
        if cells and cells[-1] == "" and len(cells) == len(fields) + 1:
            cells = cells[:-1]  # ``-n -P`` ends every line with the separator
        if len(cells) != len(fields):
            raise SlurmParseError(f"{what}: expected {len(fields)} fields, got {line!r}")
        rows.append(cells)
    return rows


def parse_assocs(text: str) -> tuple[AssocLimit, ...]:
    """``sacctmgr -n -P show assoc format=<ASSOC_FIELDS>`` into associations."""
    out = []
    for account, user, partition, grp, max_job, qos, parent in _rows(text, ASSOC_FIELDS, "assoc"):
        out.append(
            AssocLimit(
                account=account.strip(),
                user=user.strip(),
                partition=partition.strip(),
                grp_gpus=tres_gpus(grp),
                job_gpus=tres_gpus(max_job),
                qos=tuple(q for q in qos.split(",") if q),
                parent=parent.strip(),
            )
        )
    return tuple(out)


def parse_qos(text: str) -> tuple[QosLimit, ...]:
    """``sacctmgr -n -P show qos format=<QOS_FIELDS>`` into QOS limits."""
    out = []
    for name, grp, per_user, per_account, per_job in _rows(text, QOS_FIELDS, "qos"):
        out.append(
            QosLimit(
                name.strip(),
                tres_gpus(grp),
                tres_gpus(per_user),
                tres_gpus(per_account),
                tres_gpus(per_job),
            )
        )
    return tuple(out)


def parse_shares(text: str) -> tuple[ShareRow, ...]:
    """``sshare -n -P -a -o <SHARE_FIELDS>`` into tree rows (the indentation dropped).

    ``RawShares`` is a number, or ``parent`` for an association that shares its
    parent's (None here).
    """
    out = []
    for account, user, raw, _norm in _rows(text, SHARE_FIELDS, "sshare"):
        raw = raw.strip()
        try:
            shares = float(raw) if raw and raw != "parent" else None
        except ValueError as exc:
            raise SlurmParseError(f"sshare: bad RawShares {raw!r}") from exc
        out.append(ShareRow(account.strip(), user.strip(), shares))
    return tuple(out)


def slurm_duration_s(text: str) -> float | None:
    """Slurm's ``[days-]hours:minutes:seconds`` (or ``minutes:seconds``) in seconds.

    None for ``infinite``, ``UNLIMITED`` and ``n/a``: no limit.
    """
    text = text.strip()
    if text.lower() in ("infinite", "unlimited", "n/a", "none", ""):
        return None
    days, _, clock = text.rpartition("-")
    parts = clock.split(":")
    if not (days == "" or days.isdigit()) or not all(p.isdigit() for p in parts) or len(parts) > 3:
        raise SlurmParseError(f"bad Slurm duration {text!r}")
    numbers = [int(p) for p in parts]
    seconds = 0
    for unit, number in zip((3600, 60, 1)[-len(numbers) :], numbers, strict=True):
        seconds += unit * number
    return float(seconds + 86400 * int(days or 0))


def parse_partition_times(text: str) -> dict[str, float | None]:
    """``sinfo -h -o %R|%l`` into each partition's MaxTime in seconds (None: unlimited)."""
    out: dict[str, float | None] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, limit = line.partition("|")
        if not sep or not name.strip():
            raise SlurmParseError(f"sinfo: expected PARTITION|TIMELIMIT, got {line!r}")
        out[name.strip()] = slurm_duration_s(limit)
    return out


def hops_shares(rows: tuple[ShareRow, ...]) -> dict[str, float]:
    """The tree's shares as hops.conf's ``[fairshare] shares`` would give them.

    Accounts become ``account:NAME``; a user gets the share of their
    association (the largest, should they have several). ``root`` and
    associations that take their parent's share are left out: they give no
    share of their own, and hops's default share is equal.
    """
    out: dict[str, float] = {}
    for row in rows:
        if row.raw_shares is None or row.raw_shares <= 0:
            continue
        if row.account == "root" and not row.user:
            continue
        key = row.user if row.user else f"account:{row.account}"
        out[key] = max(row.raw_shares, out.get(key, 0.0))
    return out
