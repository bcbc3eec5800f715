"""The one door through which data users control enters hopsd.

Users write much of what hopsd reads: the hops tag in their job's comment,
the probe's reports (``<job>.jsonl``), progress files (``<job>.progress.json``),
whatever lies in their working directory, and the fields of their Slurm job
(name, comment, working directory, output pattern, account). A daemon that
serves every user must never let one of them stop it or mislead it, so every
reader of such data goes through this module, which is pure (standard library
only) and trusts nothing:

* sizes are checked **before** parsing (bytes, then nesting depth by a linear
  scan, so ``'[' * 20000`` is refused without the JSON decoder ever recursing);
* the decoded document is bounded in values and string lengths;
* numbers are finite: ``NaN``, ``Infinity`` and overflowing literals such as
  ``1e999`` are refused, and integers are limited in digits;
* objects have closed key sets and no repeated keys;
* every defect raises :class:`UserDataError` (a ``ValueError``) with one line
  saying why, which callers log once per job and show to the job's owner.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "JSON_LIMITS",
    "JsonLimits",
    "UserDataError",
    "check_keys",
    "finite",
    "integer",
    "load_json",
    "number_list",
    "short_text",
    "slurm_field_problem",
    "work_dir_problem",
]


class UserDataError(ValueError):
    """Data a user controls that hopsd refuses; the message says why in one line."""


@dataclass(frozen=True)
class JsonLimits:
    """Bounds of one JSON document: bytes, nesting depth, values and string length."""

    max_bytes: int
    max_depth: int = 4
    max_values: int = 4096
    max_string: int = 256
    max_int_digits: int = 19


JSON_LIMITS = JsonLimits(max_bytes=16 * 1024)
"""A small record: one probe line, one progress file."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


def load_json(data: bytes | str, limits: JsonLimits, what: str) -> Any:
    """Decode one JSON document within ``limits``; :class:`UserDataError` names the defect."""
    size = len(data)
    if size > limits.max_bytes:
        raise UserDataError(f"{what} is {size} bytes, above the {limits.max_bytes} limit")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserDataError(f"{what} is not UTF-8 text") from exc
    else:
        text = data
    _check_depth(text, limits.max_depth, what)
    try:
        value = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_repeats)
    except UserDataError as exc:
        raise UserDataError(f"{what}: {exc}") from None
    except (ValueError, RecursionError) as exc:  # RecursionError cannot pass the depth check
        raise UserDataError(f"{what} is not valid JSON: {_first_line(exc)}") from None
    _check_values(value, limits, what)
    return value


def _check_depth(text: str, max_depth: int, what: str) -> None:
    """Refuse nesting deeper than ``max_depth`` without recursion, in C-speed passes.

    Strings are cut out (brackets inside them do not count), everything but
    brackets is dropped, then the innermost pairs are removed ``max_depth``
    times: brackets left over are nested deeper (or unbalanced, which the
    decoder would refuse anyway). The quick count settles small records.
    """
    if text.count("[") + text.count("{") <= max_depth:
        return
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    for _ in range(max_depth):
        brackets = _INNERMOST.sub("", brackets)
        if not brackets:
            return
    if brackets:
        raise UserDataError(f"{what} is nested deeper than {max_depth} levels (or unbalanced)")


def _check_values(value: Any, limits: JsonLimits, what: str) -> None:
    """Count every value and measure every string, iteratively (the depth is bounded anyway)."""
    stack = [value]
    count = 0
    int_bound = 10**limits.max_int_digits
    while stack:
        item = stack.pop()
        count += 1
        if count > limits.max_values:
            raise UserDataError(f"{what} holds more than {limits.max_values} values")
        if isinstance(item, float) and not math.isfinite(item):  # 1e999 decodes as inf
            raise UserDataError(f"{what} holds a number that is not finite")
        if isinstance(item, int) and not -int_bound < item < int_bound:
            raise UserDataError(
                f"{what} holds an integer of more than {limits.max_int_digits} digits"
            )
        if isinstance(item, str) and len(item) > limits.max_string:
            raise UserDataError(f"{what} holds a string longer than {limits.max_string}")
        if isinstance(item, dict):
            for key, inner in item.items():
                if len(key) > limits.max_string:
                    raise UserDataError(f"{what} holds a key longer than {limits.max_string}")
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)


def _no_constant(name: str) -> Any:
    raise UserDataError(f"{name} is not a finite number")


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise UserDataError(f"repeats key {key[:32]!r}")
        out[key] = value
    return out


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__


# -- values of a decoded object ---------------------------------------------------------


def check_keys(
    record: Mapping[str, Any], allowed: Collection[str], what: str, required: Collection[str] = ()
) -> None:
    """A closed key set: no key outside ``allowed``, every key of ``required`` present."""
    unknown = sorted(k for k in record if k not in allowed)
    if unknown:
        shown = ", ".join(repr(k[:32]) for k in unknown[:3])
        raise UserDataError(f"{what} has unknown keys {shown}")
    missing = sorted(k for k in required if k not in record)
    if missing:
        raise UserDataError(f"{what} lacks {', '.join(missing)}")


def finite(value: object, low: float, high: float, what: str) -> float:
    """A finite number (not a bool) in ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserDataError(f"{what} is not a number")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise UserDataError(f"{what}={number:g} is outside {low:g}..{high:g}")
    return number


def integer(value: object, low: int, high: int, what: str) -> int:
    """An integer (not a bool) in ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UserDataError(f"{what} is not an integer in {low}..{high}")
    return value


def short_text(
    value: object, max_chars: int, what: str, pattern: re.Pattern[str] | None = None
) -> str:
    """A non-empty printable string of at most ``max_chars``, matching ``pattern`` if given."""
    if not isinstance(value, str) or not 0 < len(value) <= max_chars:
        raise UserDataError(f"{what} is not a string of 1..{max_chars} characters")
    if not value.isprintable() or (pattern is not None and not pattern.fullmatch(value)):
        raise UserDataError(f"{what} {value[:32]!r} holds characters hops does not accept")
    return value


def number_list(value: object, max_len: int, high: float, what: str) -> tuple[float, ...]:
    """A list of at most ``max_len`` finite numbers in ``0..high``."""
    if not isinstance(value, list) or len(value) > max_len:
        raise UserDataError(f"{what} is not a list of at most {max_len} numbers")
    return tuple(finite(v, 0.0, high, what) for v in value)


# -- fields of a user's Slurm job -------------------------------------------------------

MAX_PATH_CHARS = 4096
MAX_NAME_CHARS = 1024
MAX_OWNER_CHARS = 64  # the ledger's user and account columns
_OWNER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]*\$?")


def work_dir_problem(path: str) -> str:
    """Why a job's working directory cannot be its spool, or "" when it may be.

    It must be absolute (a relative one would resolve against hopsd's own
    directory), bounded and free of control characters.
    """
    if not path:
        return "the working directory is unknown"
    if len(path) > MAX_PATH_CHARS:
        return f"the working directory is longer than {MAX_PATH_CHARS} characters"
    if not path.startswith("/"):
        return "the working directory is not an absolute path"
    if not path.isprintable():
        return "the working directory holds control characters"
    return ""


def slurm_field_problem(user: str, account: str, name: str, output: str) -> str:
    """Why a job's Slurm fields cannot be taken into the ledger, or "" when they can.

    Owner and account go into bounded ledger columns (PostgreSQL refuses a
    longer value, which would fail the whole tick's transaction); the name and
    output pattern are only logged and shown, but are bounded all the same.
    """
    for what, value in (("owner", user), ("account", account)):
        if len(value) > MAX_OWNER_CHARS or (value and not _OWNER_RE.fullmatch(value)):
            return f"the job's {what} {value[:32]!r} is not a valid name of 1..{MAX_OWNER_CHARS}"
    if len(name) > MAX_NAME_CHARS:
        return f"the job name is longer than {MAX_NAME_CHARS} characters"
    if len(output) > MAX_PATH_CHARS or "\x00" in output:
        return "the job's output path is too long or holds a NUL character"
    return ""
