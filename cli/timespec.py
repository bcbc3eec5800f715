"""Times as ``sacct -S/-E`` reads them, plus hops's short durations: one parser for every command.

``hops history -S/-E`` and ``hops replay --since``, ``-S/--from``, ``-E/--to``
take the same spellings, so a user who knows sacct needs to learn nothing:

* ``now``, ``now-1day``, ``now-24hours``, ``now-30minutes``, ``now-90`` (seconds,
  as sacct), ``now+1hour``; units ``s|sec|second(s)``, ``m|min|minute(s)``,
  ``h|hour(s)``, ``d|day(s)``, ``w|week(s)``;
* a bare duration means that long ago: ``24h``, ``7d``, ``30m``, ``-3d``;
* ``YYYY-MM-DD[THH:MM[:SS]]`` (ISO 8601, an offset such as ``+02:00`` allowed);
* ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]``, each with an optional
  ``-HH:MM[:SS]``;
* ``HH:MM[:SS]`` with an optional ``AM``/``PM``; ``today``/``midnight``,
  ``elevenses`` (11:00), ``noon``, ``fika`` (15:00), ``teatime`` (16:00);
* epoch seconds (``1764583200``; four or six digits are ``MMDD[YY]``).

Like sacct, which looks back, a time of day without a date that is still to
come today means yesterday, and a date without a year still to come means last
year. Times without an offset are local time (the process's zone, ``TZ`` if
set), as sacct reads them; ``hops history`` prints its times in that zone too.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, tzinfo

#: Seconds per unit, every spelling sacct's ``now-N<unit>`` takes and hops's short ones.
UNIT_S: dict[str, float] = {
    **dict.fromkeys(("", "s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
    **dict.fromkeys(("w", "week", "weeks"), 7 * 86400.0),
}
#: sacct's named times of day.
NAMED_HOURS = {"today": 0, "midnight": 0, "elevenses": 11, "noon": 12, "fika": 15, "teatime": 16}
HINT = "e.g. now-1day, 24h, 2026-12-01T10:00, 12/01, 1201, 10:00"

_NUMBER = r"(\d+(?:\.\d+)?)"
_DURATION = re.compile(_NUMBER + r"\s*([a-z]*)", re.ASCII)
_NOW = re.compile(r"now(?:\s*([+-])\s*" + _NUMBER + r"\s*([a-z]*))?", re.ASCII)
_AGO = re.compile(r"-?" + _NUMBER + r"\s*([a-z]+)", re.ASCII)
_CLOCK = r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)?"
_TIME_OF_DAY = re.compile(_CLOCK, re.ASCII)
_SLURM_DATE = re.compile(
    r"(?:(\d{2})(\d{2})(\d{2})?|(\d{1,2})([/.])(\d{1,2})(?:\5(\d{2}|\d{4}))?)(?:-" + _CLOCK + ")?",
    re.ASCII,
)


def parse_time(text: str, now: float, flag: str = "--since", tz: tzinfo | None = None) -> float:
    """Epoch seconds of any spelling listed in the module's docstring.

    ``tz`` is the zone of times without an offset; None (the commands' choice)
    is local time, read when called, so a ``TZ`` set since start-up counts and
    each date falls on its own side of a daylight-saving change.
    Raises ValueError naming ``flag`` and the accepted spellings, so each
    command can turn it into its one-line usage error.
    """
    spec = text.strip().lower()
    for reader in (_relative, _named, _slurm_date, _epoch, _iso, _time_of_day):
        when = reader(spec, now, tz)
        if when is not None:
            return when
    raise ValueError(f"{flag}: not a time: {text!r} ({HINT})")


def _relative(spec: str, now: float, _tz: tzinfo | None) -> float | None:
    """``now``, ``now-N[unit]`` (sacct; seconds by default), ``24h`` or ``-3d`` (that long ago)."""
    found = _NOW.fullmatch(spec)
    if found is not None:
        if found.group(1) is None:
            return now
        if found.group(3) not in UNIT_S:
            return None
        delta = float(found.group(2)) * UNIT_S[found.group(3)]
        return now - delta if found.group(1) == "-" else now + delta
    found = _AGO.fullmatch(spec)
    if found is not None and found.group(2) in UNIT_S:
        return now - float(found.group(1)) * UNIT_S[found.group(2)]
    return None


def _named(spec: str, now: float, tz: tzinfo | None) -> float | None:
    """``today``, ``midnight``, ``noon``, ``elevenses``, ``fika``, ``teatime``."""
    if spec not in NAMED_HOURS:
        return None
    return _looking_back(None, time(NAMED_HOURS[spec]), now, tz)


def _epoch(spec: str, _now: float, _tz: tzinfo | None) -> float | None:
    """Seconds since 1970 (what ``hops replay --from`` took before); 4 or 6 digits are dates."""
    if re.fullmatch(r"\d+(\.\d+)?", spec, re.ASCII) and len(spec) not in (4, 6):
        return float(spec)
    return None


def _iso(spec: str, _now: float, tz: tzinfo | None) -> float | None:
    """``YYYY-MM-DD[THH:MM[:SS]]`` with an optional offset (sacct's own ISO form)."""
    if not re.match(r"\d{4}-\d{2}-\d{2}", spec, re.ASCII):
        return None
    try:
        when = datetime.fromisoformat(spec.upper())
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=tz)).timestamp()


def _slurm_date(spec: str, now: float, tz: tzinfo | None) -> float | None:
    """``MMDD[YY]``, ``MM/DD[/YY]`` or ``MM.DD[.YY]``, each with an optional ``-HH:MM[:SS]``."""
    found = _SLURM_DATE.fullmatch(spec)
    if found is None:
        return None
    g = found.groups()
    month, day, year = (g[0], g[1], g[2]) if g[0] else (g[3], g[5], g[6])
    clock = _clock(g[7:11]) if g[7] else time(0)
    if clock is None:
        return None
    try:
        if year is None:
            return _looking_back((int(month), int(day)), clock, now, tz)
        full_year = int(year) + (2000 if len(year) == 2 else 0)
        return datetime.combine(date(full_year, int(month), int(day)), clock, tz).timestamp()
    except ValueError:
        return None


def _time_of_day(spec: str, now: float, tz: tzinfo | None) -> float | None:
    """``HH:MM[:SS][AM|PM]``: today, or yesterday when that is still to come."""
    found = _TIME_OF_DAY.fullmatch(spec)
    clock = None if found is None else _clock(found.groups())
    return None if clock is None else _looking_back(None, clock, now, tz)


def _clock(parts: tuple[str | None, ...]) -> time | None:
    """(hour, minute, second, am/pm) as a time, or None when out of range."""
    hour, minute, second, half = parts
    h, m, s = int(hour or 0), int(minute or 0), int(second or 0)
    if half is not None:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if half == "pm" else 0)
    if h > 23 or m > 59 or s > 59:
        return None
    return time(h, m, s)


def _looking_back(
    month_day: tuple[int, int] | None, clock: time, now: float, tz: tzinfo | None
) -> float:
    """A date without a year (or a time without a date) at its latest moment not after now.

    Why: sacct asks about the past, so ``-S 23:00`` at 10:00 means last night
    and ``-S 12/31`` in June means last December.
    """
    today = datetime.fromtimestamp(now, tz).date()
    if month_day is None:
        when = datetime.combine(today, clock, tz)
        return (when - timedelta(days=1) if when.timestamp() > now else when).timestamp()
    month, day = month_day
    when = datetime.combine(date(today.year, month, day), clock, tz)
    if when.timestamp() > now:
        when = datetime.combine(date(today.year - 1, month, day), clock, tz)
    return when.timestamp()
