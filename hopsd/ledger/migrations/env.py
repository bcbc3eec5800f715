"""Alembic environment of the hops ledger.

Migrations normally run through :mod:`hopsd.ledger.migrate`, which hands a live
connection over in ``config.attributes["connection"]`` so the whole upgrade is
one transaction on the engine hops itself configured (WAL, timeouts, typed
errors). When Alembic is called directly, the URL comes from ``-x url=...`` or
the ``HOPS_LEDGER_URL`` environment variable.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy.engine import Connection

from hopsd.ledger.engine import make_engine, normalise_url
from hopsd.ledger.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url")
    url = url or os.environ.get("HOPS_LEDGER_URL") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("no ledger URL: pass -x url=... or set HOPS_LEDGER_URL")
    return url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=False,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(
        url=normalise_url(_url()),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    engine = make_engine(_url())
    try:
        with engine.begin() as conn:
            _configure(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
