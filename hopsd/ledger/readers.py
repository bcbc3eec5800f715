"""A PostgreSQL role that may read the ledger and nothing else, for the CLI's ``read_url``.

Users' ``hops status`` needs to read the ledger; the daemon's credential can
write it and must not sit in a file every user reads. ``hops db grant-reader``
prints (or runs, with the daemon's URL) the statements below: a login role
without any privilege but CONNECT, USAGE on the ledger's schema and SELECT on
its tables (now and, through default privileges, the tables later migrations
add), whose sessions also start read-only.
"""

from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.engine import URL

from hopsd.core.errors import InvalidInputError
from hopsd.ledger.engine import make_engine, normalise_url

_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def reader_statements(url: str | URL, role: str, password: str | None = None) -> list[str]:
    """The SQL that creates (or narrows) ``role`` as a reader of the ledger at ``url``."""
    parsed = normalise_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise InvalidInputError(
            "a reader role is for PostgreSQL; on SQLite give users read access to the "
            "ledger file and its directory (e.g. mode 0644 and 0755): hops opens it read-only"
        )
    if not _ROLE.match(role):
        raise InvalidInputError(
            f"role {role!r}: use lower-case letters, digits and '_' (at most 63), "
            "starting with a letter or '_'"
        )
    database = _ident(str(parsed.database or "postgres"))
    schema = _ident(_schema_of(parsed))
    who = _ident(role)
    login = "LOGIN" if password is None else f"LOGIN PASSWORD {_literal(password)}"
    create = (
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {_literal(role)}) "
        f"THEN CREATE ROLE {who}; END IF; END $$"
    )
    return [
        create,
        f"ALTER ROLE {who} {login} NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION",
        f"ALTER ROLE {who} SET default_transaction_read_only = on",
        f"GRANT CONNECT ON DATABASE {database} TO {who}",
        f"GRANT USAGE ON SCHEMA {schema} TO {who}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {who}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT SELECT ON TABLES TO {who}",
    ]


def grant_reader(url: str | URL, role: str, password: str | None = None) -> list[str]:
    """Run :func:`reader_statements` through ``url`` (the daemon's, which owns the tables)."""
    statements = reader_statements(url, role, password)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()
    return statements


def _schema_of(url: URL) -> str:
    """The schema the ledger's tables live in: the URL's ``search_path`` option, else public."""
    options = url.query.get("options", "")
    text_options = " ".join(options) if isinstance(options, tuple) else options
    found = re.search(r"search_path\s*=\s*([^\s,]+)", text_options)
    return found.group(1).strip("\"'") if found else "public"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
