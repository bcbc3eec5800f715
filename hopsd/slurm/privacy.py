"""Slurm's privacy settings and who it trusts, read from the controller.

``scontrol show config`` gives ``PrivateData`` and ``SlurmUser`` (what the
controller runs with, not what a file on this host says); ``sacctmgr`` gives
the users whose ``AdminLevel`` is Operator or Administrator, who see all in
Slurm and so in hops. Both parsers are pure and tested on recorded output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hopsd.core.privacy import PrivateData
from hopsd.slurm.runner import Runner

_CONFIG_LINE = re.compile(r"^(\w+)\s*=\s*(.*?)\s*$")
_TRUSTED_LEVELS = frozenset({"operator", "administrator"})


@dataclass(frozen=True, slots=True)
class SlurmPrivacy:
    """PrivateData, and the users Slurm lets see everything besides root."""

    rules: PrivateData
    trusted: frozenset[str] = frozenset()


def parse_config(text: str) -> tuple[PrivateData, str]:
    """``PrivateData`` and the SlurmUser's name from ``scontrol show config``."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _CONFIG_LINE.match(line)
        if match:
            values[match.group(1)] = match.group(2)
    slurm_user = values.get("SlurmUser", "").split("(", 1)[0]
    return PrivateData.parse(values.get("PrivateData", "")), slurm_user


def parse_admins(text: str) -> frozenset[str]:
    """Users with AdminLevel Operator or Administrator from ``sacctmgr -nP show user``."""
    names = set()
    for line in text.splitlines():
        user, _, level = line.partition("|")
        if level.strip().lower() in _TRUSTED_LEVELS:
            names.add(user.strip())
    return frozenset(names)


def read_privacy(run: Runner, timeout: float = 10.0) -> SlurmPrivacy:
    """Ask the controller (and accounting, when it runs) once; errors mean "all private".

    A controller that does not answer gives the strictest rules rather than
    none: hops must not show more than Slurm would.
    """
    config = run(["scontrol", "show", "config"], timeout)
    if not config.ok:
        return SlurmPrivacy(PrivateData(jobs=True, usage=True, accounts=True))
    rules, slurm_user = parse_config(config.stdout)
    trusted = {slurm_user} if slurm_user else set()
    if rules.any:
        admins = run(["sacctmgr", "-nP", "show", "user", "format=user,adminlevel"], timeout)
        if admins.ok:
            trusted |= parse_admins(admins.stdout)
    return SlurmPrivacy(rules, frozenset(trusted))
