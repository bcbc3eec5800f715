"""What every ``hops`` command shares: configuration, errors, output.

Errors are one line on stderr prefixed ``hops:`` and a non-zero exit, never a
traceback. Nothing here imports typer: ``hops status`` runs without it (see
:mod:`hops_cli.quick`). ``--json`` output goes to stdout with a stable schema; tables are
rendered with rich, which drops colour by itself when stdout is not a TTY.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # imported where used: every command loads this module first
    import typer
    from rich.console import Console

    from hopsd.config import HopsConfig

EXIT_USAGE = 2
EXIT_FAILURE = 1


@dataclass
class CliState:
    """Global options given before the command (``hops --config F status``)."""

    config_path: str | None = None


def state(ctx: typer.Context) -> CliState:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, CliState) else CliState()


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """Print one clear line and exit non-zero (typer and click let SystemExit through)."""
    warn(message)
    raise SystemExit(code)


def warn(message: str) -> None:
    """One ``hops:`` line on stderr."""
    sys.stdout.flush()
    sys.stderr.write(f"hops: {message}\n")
    sys.stderr.flush()


def say(line: str = "") -> None:
    """One line on stdout."""
    sys.stdout.write(line + "\n")


def config_of(ctx: typer.Context) -> HopsConfig:
    """The hops.conf in force (``--config``, then ``HOPS_CONF``, then defaults)."""
    return load_config_or_fail(state(ctx).config_path)


def load_config_or_fail(path: str | None) -> HopsConfig:
    """The hops.conf at ``path`` (else ``HOPS_CONF``, else defaults); a bad one: exit 2."""
    from hopsd.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        fail(f"invalid configuration: {exc}", EXIT_USAGE)


def console() -> Console:
    """Rich console; when piped, wide enough that tables are never truncated with an ellipsis."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console(highlight=False)
    return Console(highlight=False, width=200)


def print_json(payload: Any) -> None:
    """The machine-readable output of every read command: standard JSON only.

    A non-finite number (which a ledger written by an older hopsd may hold)
    is printed as ``null``: ``NaN`` and ``Infinity`` are not JSON.
    """
    text = json.dumps(_finite(payload), indent=2, sort_keys=True, default=str, allow_nan=False)
    sys.stdout.write(text + "\n")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


@contextmanager
def friendly_errors(action: str) -> Iterator[None]:
    """Turn hops's typed errors into one line and a non-zero exit."""
    from hopsd.core.errors import HopsError

    try:
        yield
    except SystemExit:
        raise
    except HopsError as exc:
        fail(f"{action}: {exc}")
    except OSError as exc:
        fail(f"{action}: {exc.strerror or exc}")
