"""Reservations through whichever port hopsd runs on.

Reading them is not part of :class:`~hopsd.slurm.port.SlurmPort`: the CLI
backend reads them (``list_reservations``); a backend without that read
(slurmrestd, pyslurm today) gives None, and the caller says once that
reservations are not seen.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from hopsd.slurm.parse_reservations import SlurmReservation


@runtime_checkable
class ReservationReader(Protocol):
    def list_reservations(self) -> list[SlurmReservation]: ...


def read_reservations(port: object) -> list[SlurmReservation] | None:
    """The port's reservations, or None when this backend cannot read them."""
    if not isinstance(port, ReservationReader):
        return None
    return port.list_reservations()
