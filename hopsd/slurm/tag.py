"""The hops tag: a job's hops metadata carried in Slurm's ``--comment``.

``hops submit`` writes it as the user; the daemon reads it back from Slurm.
Anyone can put anything in a comment, so decoding trusts nothing: a fixed
prefix, compact JSON with a closed set of keys, exact types, ranges and a size
limit. A comment that is not a hops tag at all (no prefix) is simply not ours.

Layout: ``hops1:`` followed by a JSON object, e.g.
``hops1:{"d":[1,2,4],"n":1000000,"b":32,"m":"resnet50","p":25000000,"lr":[0.1],"ls":"linear"}``

Keys: ``d`` demand set (strictly increasing GPU counts), ``n`` total samples,
``b`` per-GPU batch size, ``m`` model name, ``p`` model parameters, ``lr``
learning rates (one, or one per demand), ``ls`` scaling rule applied to a
single rate (``none``, ``linear``, ``sqrt``), ``t`` the only GPU types the job
may run on, ``xt`` GPU types it must never run on, ``np`` 1 when hops must not
move, preempt or profile the job once it runs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hopsd.slurm.errors import TagError
from hopsd.userdata import JsonLimits, UserDataError, load_json

PREFIX = "hops1:"
MAX_TAG_CHARS = 1024
MAX_DEMANDS = 32
MAX_GPUS = 4096
MAX_SAMPLES = 1e15
MAX_BATCH = 1_000_000
MAX_PARAMS = 1e13
MAX_LR = 100.0
LR_SCALES = ("none", "linear", "sqrt")
MAX_TYPES = 16
#: The model name of a job that named none (profiles of such jobs are never shared).
UNKNOWN_MODEL = "unknown"
#: A model name: one word, or ``ORG/NAME`` as model hubs name them (``meta-llama/Llama-2-7b``).
#: Each part starts with a letter or digit, so no part is ``.``/``..`` nor starts with ``-``,
#: and at most one ``/`` joins two non-empty parts: nothing absolute, nothing that climbs.
_MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*(/[A-Za-z0-9][A-Za-z0-9._+-]*)?")
MAX_MODEL_CHARS = 64
_TYPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,31}")
_KEYS = frozenset({"d", "n", "b", "m", "p", "lr", "ls", "t", "xt", "np"})
_REQUIRED = frozenset({"d", "n"})
_TAG_JSON = JsonLimits(max_bytes=MAX_TAG_CHARS, max_depth=2, max_values=256, max_string=64)


@dataclass(frozen=True, slots=True)
class HopsTag:
    """A validated hops tag. Construction validates, so an instance is always sound."""

    demands: tuple[int, ...]
    total_samples: float
    batch_size: int = 32
    model: str = UNKNOWN_MODEL
    params: float = 25e6
    lr: tuple[float, ...] = ()
    lr_scale: str = "none"
    types: tuple[str, ...] = ()
    exclude_types: tuple[str, ...] = ()
    no_preempt: bool = False

    def __post_init__(self) -> None:
        _check_demands(self.demands)
        _check_number("total samples", self.total_samples, 0.0, MAX_SAMPLES, open_low=True)
        _check_int("batch size", self.batch_size, 1, MAX_BATCH)
        if not _is_model_name(self.model):
            raise TagError(
                f"model name {self.model!r} is not 1-{MAX_MODEL_CHARS} of [A-Za-z0-9._+-], "
                "as NAME or ORG/NAME"
            )
        _check_number("params", self.params, 0.0, MAX_PARAMS)
        _check_lrs(self.lr, len(self.demands))
        if self.lr_scale not in LR_SCALES:
            raise TagError(f"lr scale {self.lr_scale!r} is not one of {LR_SCALES}")
        if self.lr_scale != "none" and len(self.lr) != 1:
            raise TagError("an lr scaling rule needs exactly one base learning rate")
        _check_types("--types", self.types)
        _check_types("--exclude-types", self.exclude_types)
        if not isinstance(self.no_preempt, bool):
            raise TagError(f"no-preempt must be true or false, got {self.no_preempt!r}")

    def encode(self) -> str:
        """The comment string; raises ``TagError`` if it would exceed the size limit."""
        body: dict[str, Any] = {
            "d": list(self.demands),
            "n": _compact_number(self.total_samples),
            "b": self.batch_size,
            "m": self.model,
            "p": _compact_number(self.params),
        }
        if self.lr:
            body["lr"] = list(self.lr)
        if self.lr_scale != "none":
            body["ls"] = self.lr_scale
        if self.types:
            body["t"] = list(self.types)
        if self.exclude_types:
            body["xt"] = list(self.exclude_types)
        if self.no_preempt:
            body["np"] = 1
        text = PREFIX + json.dumps(body, separators=(",", ":"), allow_nan=False)
        if len(text) > MAX_TAG_CHARS:
            raise TagError(f"tag is {len(text)} characters, limit {MAX_TAG_CHARS}")
        return text

    def lr_for(self, gpus: int) -> float | None:
        """Learning rate for a run on ``gpus`` GPUs (scaled from the smallest demand)."""
        if gpus not in self.demands:
            raise TagError(f"{gpus} GPUs is not in the demand set {self.demands}")
        if not self.lr:
            return None
        if len(self.lr) == len(self.demands) and self.lr_scale == "none" and len(self.lr) > 1:
            return self.lr[self.demands.index(gpus)]
        ratio = gpus / self.demands[0]
        if self.lr_scale == "linear":
            return self.lr[0] * ratio
        if self.lr_scale == "sqrt":
            return self.lr[0] * math.sqrt(ratio)
        return self.lr[0]


def _is_model_name(value: object) -> bool:
    """A model name hops stores and shows: see :data:`_MODEL_RE`, at most 64 characters."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_MODEL_CHARS
        and _MODEL_RE.fullmatch(value) is not None
    )


def is_hops_comment(comment: str | None) -> bool:
    """True when a comment claims to be a hops tag (it may still be invalid)."""
    return bool(comment) and str(comment).startswith(PREFIX)


def decode(comment: str) -> HopsTag:
    """Parse and validate a comment as a hops tag; any defect raises ``TagError``."""
    if not isinstance(comment, str):
        raise TagError("a tag must be a string")
    if len(comment) > MAX_TAG_CHARS:
        raise TagError(f"tag is {len(comment)} characters, limit {MAX_TAG_CHARS}")
    if not comment.startswith(PREFIX):
        raise TagError(f"not a hops tag (no {PREFIX!r} prefix)")
    body = _load_object(comment[len(PREFIX) :])
    unknown = set(body) - _KEYS
    if unknown:
        raise TagError(f"unknown tag keys {sorted(unknown)}")
    missing = _REQUIRED - set(body)
    if missing:
        raise TagError(f"tag lacks required keys {sorted(missing)}")
    demands = body["d"]
    if not isinstance(demands, list):
        raise TagError("demand set 'd' must be a list")
    lr = body.get("lr", [])
    if not isinstance(lr, list):
        raise TagError("learning rates 'lr' must be a list")
    no_preempt = body.get("np", 0)
    if not _is_int(no_preempt) or no_preempt not in (0, 1):
        raise TagError(f"no-preempt 'np' must be 0 or 1, got {no_preempt!r}")
    return HopsTag(
        demands=tuple(demands),
        total_samples=_as_float(body["n"]),
        batch_size=body.get("b", 32),
        model=body.get("m", UNKNOWN_MODEL),
        params=_as_float(body.get("p", 25e6)),
        lr=tuple(lr),
        lr_scale=body.get("ls", "none"),
        types=_as_names("t", body.get("t", [])),
        exclude_types=_as_names("xt", body.get("xt", [])),
        no_preempt=bool(no_preempt),
    )


def _as_names(key: str, value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list):
        raise TagError(f"GPU types {key!r} must be a list")
    return tuple(value)


#: Decoded comments kept: every tick reads every queued job's tag again, and a queue of
#: tens of thousands must not decode (parse JSON, validate) each of them each tick.
DECODED_CACHE = 65536


def try_decode(comment: str | None) -> tuple[HopsTag | None, str | None]:
    """``(tag, None)`` if valid, ``(None, reason)`` if bad, ``(None, None)`` if not a hops tag."""
    if not is_hops_comment(comment):
        return None, None
    text = str(comment)
    if len(text) > MAX_TAG_CHARS + len(PREFIX):  # refused anyway; never kept in the cache
        return _try_decode.__wrapped__(text)
    return _try_decode(text)


@lru_cache(maxsize=DECODED_CACHE)
def _try_decode(comment: str) -> tuple[HopsTag | None, str | None]:
    """The decoding of one comment (a tag is immutable, so one decoding serves every tick)."""
    try:
        return decode(comment), None
    except TagError as exc:
        return None, str(exc)


def _as_float(value: Any) -> Any:
    """Numbers become floats; anything else is passed on for validation to refuse."""
    return float(value) if _is_number(value) else value


def _load_object(text: str) -> dict[str, Any]:
    """The tag's JSON body through :mod:`hopsd.userdata` (bounded, finite, no repeated keys)."""
    try:
        value = load_json(text, _TAG_JSON, "tag body")
    except UserDataError as exc:
        raise TagError(str(exc)) from None
    if not isinstance(value, dict):
        raise TagError("tag body must be a JSON object")
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(float(value))  # type: ignore[arg-type]


def _check_int(what: str, value: object, low: int, high: int) -> None:
    if not _is_int(value) or not low <= value <= high:  # type: ignore[operator]
        raise TagError(f"{what} must be an integer in {low}..{high}, got {value!r}")


def _check_number(
    what: str, value: object, low: float, high: float, open_low: bool = False
) -> None:
    if not _is_number(value):
        raise TagError(f"{what} must be a finite number, got {value!r}")
    number = float(value)  # type: ignore[arg-type]
    too_low = number <= low if open_low else number < low
    if too_low or number > high:
        raise TagError(f"{what} {number!r} is outside the allowed range")


def _check_demands(demands: tuple[object, ...]) -> None:
    if not isinstance(demands, tuple) or not 1 <= len(demands) <= MAX_DEMANDS:
        raise TagError(f"demand set must hold 1..{MAX_DEMANDS} GPU counts")
    for d in demands:
        _check_int("a demand", d, 1, MAX_GPUS)
    if list(demands) != sorted(set(demands)):  # type: ignore[type-var]
        raise TagError(f"demand set must be strictly increasing, got {list(demands)}")


def _check_lrs(lrs: tuple[object, ...], n_demands: int) -> None:
    if not isinstance(lrs, tuple) or len(lrs) not in (0, 1, n_demands):
        raise TagError("give no learning rate, one, or one per demand")
    for lr in lrs:
        _check_number("a learning rate", lr, 0.0, MAX_LR, open_low=True)


def _check_types(what: str, types: tuple[object, ...]) -> None:
    """GPU type names: a short list of distinct names (checked against the cluster later)."""
    if not isinstance(types, tuple) or len(types) > MAX_TYPES:
        raise TagError(f"{what}: give at most {MAX_TYPES} GPU types")
    for name in types:
        if not isinstance(name, str) or not _TYPE_RE.fullmatch(name):
            raise TagError(f"{what}: GPU type {name!r} is not 1-32 of [A-Za-z0-9._+-]")
    if len(set(types)) != len(types):
        raise TagError(f"{what}: a GPU type is named twice")


def _compact_number(value: float) -> int | float:
    """Integral floats are written as integers to keep the tag short."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value
