"""Schema migrations of the ledger (Alembic, scripts in ``hopsd/ledger/migrations``).

The daemon refuses to run on an outdated schema (:func:`check_schema`) rather
than writing rows the old tables cannot hold; the operator upgrades explicitly
with ``hopsd db upgrade`` (or ``hops db upgrade``), which calls :func:`upgrade`.
Each migration runs inside one transaction on the engine hops configures, so a
failed upgrade leaves the previous revision in place (PostgreSQL and SQLite both
have transactional DDL).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlalchemy.engine import URL

from hopsd.ledger.engine import make_engine, normalise_url, redact
from hopsd.ledger.errors import SchemaNewerError, SchemaOutdatedError
from hopsd.ledger.private_copy import make_private

# The migration scripts ship inside the package (a wheel carries them as package
# data), so an installed hops migrates without a source checkout.
SQL_DIR = Path(__file__).resolve().parent / "migrations"

UPGRADE_COMMAND = "hopsd db upgrade"


def alembic_config(url: str | URL | None = None) -> Config:
    """An Alembic configuration built in code, pointing at the packaged migrations."""
    if not (SQL_DIR / "env.py").is_file():
        raise FileNotFoundError(f"ledger migrations not found at {SQL_DIR}")
    config = Config()
    config.set_main_option("path_separator", "os")
    config.set_main_option("script_location", str(SQL_DIR))
    config.set_main_option("version_locations", str(SQL_DIR / "versions"))
    if url is not None:
        config.set_main_option("sqlalchemy.url", str(url).replace("%", "%%"))
    return config


def head_revision() -> str:
    """The newest revision this code knows."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise FileNotFoundError(f"no migration scripts in {SQL_DIR / 'versions'}")
    return head


def upgrade(url: str | URL, revision: str = "head") -> None:
    """Migrate the ledger at ``url`` up to ``revision`` (creating it when empty).

    A new SQLite ledger's directory is created too, so the embedded default
    (``/var/lib/hops/ledger.sqlite``) works on a fresh machine, and its files
    are made private (users read copies from hopsd: :mod:`hopsd.ledger.private_copy`).
    """
    parsed = normalise_url(url)
    sqlite_file = parsed.get_backend_name() == "sqlite" and parsed.database not in (
        None,
        "",
        ":memory:",
    )
    if sqlite_file:
        Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)
    _run(url, lambda cfg: command.upgrade(cfg, revision))
    if sqlite_file:
        make_private(Path(str(parsed.database)))


def downgrade(url: str | URL, revision: str) -> None:
    """Migrate down to ``revision`` (``"-1"`` for one step, ``"base"`` for empty)."""
    _run(url, lambda cfg: command.downgrade(cfg, revision))


def current_revision(url: str | URL) -> str | None:
    """The revision the database is at, or None for an empty (unmigrated) database."""
    engine = make_engine(url)
    try:
        return revision_of(engine)
    finally:
        engine.dispose()


def revision_of(engine: Engine) -> str | None:
    """Like :func:`current_revision`, on an engine the caller already has."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def check_schema(engine: Engine) -> None:
    """Raise unless the database is exactly at this code's head revision.

    Why: writing with a newer model into older tables fails half-way through a
    tick; refusing at startup with the command to run is the clear alternative.
    """
    current = revision_of(engine)
    head = head_revision()
    if current == head:
        return
    where = redact(engine.url)
    script = ScriptDirectory.from_config(alembic_config())
    if current is not None and _unknown(script, current):
        raise SchemaNewerError(
            f"ledger {where} is at revision {current}, which this hops does not know "
            f"(newest known: {head}); upgrade hops, or downgrade the ledger with the newer one"
        )
    shown = "empty (no schema)" if current is None else f"at revision {current}"
    raise SchemaOutdatedError(
        f"ledger {where} is {shown}, this hops needs revision {head}: "
        f"run `{UPGRADE_COMMAND}` (or `hops db upgrade`)"
    )


def _unknown(script: ScriptDirectory, revision: str) -> bool:
    try:
        return script.get_revision(revision) is None
    except Exception:  # alembic raises its own CommandError/ResolutionError here
        return True


def _run(url: str | URL, action: Callable[[Config], object]) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            config = alembic_config(url)
            config.attributes["connection"] = conn
            action(config)
    finally:
        engine.dispose()
