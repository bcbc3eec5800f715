"""Local validation of ``hops submit`` input: demand sets, sample counts, #SBATCH headers.

Everything here is checked before anything reaches Slurm, so invalid input
never submits a job. Errors are :class:`SubmitError` with one clear line.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

MAX_DEMAND_OPTIONS = 8
MAX_HEADER_BYTES = 1024 * 1024
"""How much of a script is read for #SBATCH lines (they must come before any command)."""
MAX_DIRECTIVE_CHARS = 4096
"""R_num of the method: a range is expanded into at most this many GPU counts."""

_GPU_OPTIONS = ("--gres", "--gpus", "-G", "--gpus-per-node", "--gpus-per-task", "--gpus-per-socket")
_OWNED_BY_HOPS = ("--hold", "-H", "--requeue", "--no-requeue", "--comment")


class SubmitError(ValueError):
    """Input ``hops submit`` refuses, with a message fit for the user."""


@dataclass(frozen=True)
class ScriptInfo:
    """What hops needs from a batch script: its path and its #SBATCH options."""

    path: Path
    directives: tuple[str, ...]


def parse_gpus(text: str) -> tuple[int, ...]:
    """Parse ``1,2,4`` or ``2-8`` into a strictly increasing demand set.

    A range is expanded into at most :data:`MAX_DEMAND_OPTIONS` equally spaced
    counts (both ends kept), as the method's operator does for ``[Rmin, Rmax]``.
    """
    text = text.strip()
    if not text:
        raise SubmitError("--gpus: empty demand set (give e.g. 1,2,4 or 2-8)")
    range_match = re.fullmatch(r"([0-9]+)\s*-\s*([0-9]+)", text)
    if range_match:
        low, high = int(range_match.group(1)), int(range_match.group(2))
        if low <= 0 or high < low:
            raise SubmitError(f"--gpus: range {text!r} must be positive and increasing")
        return _spread(low, high)
    counts: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit()):
            raise SubmitError(f"--gpus: {part!r} is not a GPU count (give e.g. 1,2,4 or 2-8)")
        counts.append(int(part))
    if any(c <= 0 for c in counts):
        raise SubmitError("--gpus: GPU counts must be positive")
    demands = tuple(sorted(set(counts)))
    if len(demands) > MAX_DEMAND_OPTIONS:
        raise SubmitError(f"--gpus: at most {MAX_DEMAND_OPTIONS} options, got {len(demands)}")
    return demands


def _spread(low: int, high: int) -> tuple[int, ...]:
    width = high - low
    if width + 1 <= MAX_DEMAND_OPTIONS:
        return tuple(range(low, high + 1))
    steps = MAX_DEMAND_OPTIONS - 1
    return tuple(sorted({low + round(i * width / steps) for i in range(MAX_DEMAND_OPTIONS)}))


#: Decimal multipliers a count may end in (``10M`` samples, ``2.5k``); ``B`` is billions.
COUNT_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9, "t": 10**12}
_COUNT = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e([+-]?[0-9]{1,2}))?([kmgbt]?)", re.I)


def parse_count(text: str, flag: str) -> int:
    """A whole count as people write sample counts: ``1000000``, ``1e6``, ``10M``, ``2.5k``.

    Why a parser of its own: an ``int`` option refuses ``1e6`` and ``10M``,
    and a ``float`` one would take ``nan``, ``inf`` or ``1.5`` samples. The
    suffixes are decimal (k = 1000); the result must be a whole number > 0.
    """
    found = _COUNT.fullmatch(text.strip().replace("_", ""))
    if found is None:
        raise SubmitError(f"{flag}: not a count: {text!r} (e.g. 1000000, 1e6, 10M, 2.5k)")
    mantissa, exponent, suffix = found.groups()
    value = float(mantissa) * 10.0 ** int(exponent or 0) * COUNT_SUFFIXES[suffix.lower()]
    if not math.isfinite(value) or value < 1 or value != math.floor(value):
        raise SubmitError(f"{flag}: {text!r} is not a whole number of at least 1")
    return int(value)


def total_samples(samples: int | None, epochs: float | None, dataset_size: int | None) -> int:
    """The job's size in samples: ``--samples`` or ``--epochs`` x ``--dataset-size``."""
    if samples is not None:
        if epochs is not None or dataset_size is not None:
            raise SubmitError("give either --samples or --epochs with --dataset-size, not both")
        if samples <= 0:
            raise SubmitError(f"--samples must be > 0, got {samples}")
        return samples
    if epochs is None or dataset_size is None:
        raise SubmitError("the job's size is needed: --samples N, or --epochs E --dataset-size D")
    if not math.isfinite(epochs) or epochs <= 0 or dataset_size <= 0:
        raise SubmitError("--epochs must be a finite number > 0 and --dataset-size > 0")
    return max(round(epochs * dataset_size), 1)


def read_script(path_text: str) -> ScriptInfo:
    """Check the script exists and is executable, and collect its #SBATCH options.

    Like sbatch, directives are read until the first line that is neither blank
    nor a comment.
    """
    path = Path(path_text)
    if not path.is_file():
        raise SubmitError(f"{path_text}: no such script")
    if not os.access(path, os.X_OK):
        raise SubmitError(f"{path_text}: script is not executable (chmod +x {path_text})")
    try:
        with path.open("rb") as handle:
            head = handle.read(MAX_HEADER_BYTES + 1)
        if len(head) > MAX_HEADER_BYTES:  # directives live at the top: read no further
            head = head[: head.rfind(b"\n", 0, MAX_HEADER_BYTES) + 1]
        text = head.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SubmitError(f"{path_text}: cannot read script: {exc}") from exc
    return ScriptInfo(path.resolve(), tuple(_directives(text, path_text)))


def _directives(text: str, name: str) -> list[str]:
    options: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            continue
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        if not stripped.startswith("#SBATCH"):
            break
        if len(stripped) > MAX_DIRECTIVE_CHARS:
            raise SubmitError(f"{name}:{number}: #SBATCH line longer than {MAX_DIRECTIVE_CHARS}")
        try:
            words = shlex.split(stripped[len("#SBATCH") :], comments=True)
        except ValueError as exc:
            raise SubmitError(f"{name}:{number}: unreadable #SBATCH line: {exc}") from exc
        options.extend(words)
    return options


def check_options(options: tuple[str, ...], origin: str) -> None:
    """Refuse options hops must own: GPU requests, hold/requeue and the comment tag."""
    for option in options:
        name = option.split("=", 1)[0]
        if name in _GPU_OPTIONS or name.startswith("--gres"):
            raise SubmitError(
                f"{origin}: {option!r} conflicts with hops, which sets the GPU count and type; "
                "give the acceptable counts with --gpus instead"
            )
        if name in _OWNED_BY_HOPS:
            raise SubmitError(f"{origin}: {option!r} is set by hops itself; remove it")


def type_list(text: str) -> tuple[str, ...]:
    """GPU type names from a comma-separated option ('' -> none)."""
    return tuple(t.strip() for t in text.split(",") if t.strip())
