"""The SQL of ``hops db grant-reader``: one role, SELECT only, names that cannot inject."""

from __future__ import annotations

import pytest

from hopsd.core.errors import InvalidInputError
from hopsd.ledger.readers import reader_statements

URL = "postgresql+psycopg://hops@db.example.org/hops"


def test_reader_gets_select_and_nothing_more() -> None:
    sql = reader_statements(URL, "hops_reader")
    assert sql[-2] == 'GRANT SELECT ON ALL TABLES IN SCHEMA "public" TO "hops_reader"'
    assert 'GRANT CONNECT ON DATABASE "hops" TO "hops_reader"' in sql
    assert all("INSERT" not in s and "UPDATE" not in s and "ALL PRIVILEGES" not in s for s in sql)
    assert 'ALTER ROLE "hops_reader" SET default_transaction_read_only = on' in sql


def test_schema_comes_from_the_search_path_option() -> None:
    sql = reader_statements(URL + "?options=-csearch_path%3Dledger", "r")
    assert 'GRANT USAGE ON SCHEMA "ledger" TO "r"' in sql


@pytest.mark.parametrize("role", ['r"; DROP TABLE jobs; --', "Robert", "", "1abc", "a" * 64])
def test_role_names_that_could_inject_or_surprise_are_refused(role: str) -> None:
    with pytest.raises(InvalidInputError):
        reader_statements(URL, role)


def test_password_is_a_quoted_literal() -> None:
    sql = reader_statements(URL, "r", password="it's; DROP ROLE x")
    assert "LOGIN PASSWORD 'it''s; DROP ROLE x'" in sql[1]


def test_sqlite_needs_no_role() -> None:
    with pytest.raises(InvalidInputError, match="read-only"):
        reader_statements("sqlite:////var/lib/hops/ledger.sqlite", "r")
