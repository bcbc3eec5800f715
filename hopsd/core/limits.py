"""Bounds that more than one boundary must agree on.

The daemon lease is written by one hopsd and read by every other and by the
CLI: a holder can only be believed for as long as a valid configuration could
have asked for, whatever an older or misconfigured hopsd wrote in the row.
"""

from __future__ import annotations

#: The longest lease hops.conf may ask for; a stored expiry beyond its holder's
#: last heartbeat plus this was never granted by a valid configuration.
MAX_LEASE_TTL_S = 3600.0
