"""The Alembic-free schema check agrees with Alembic's."""

from __future__ import annotations

from pathlib import Path

from hopsd.ledger.engine import make_engine
from hopsd.ledger.migrate import head_revision, upgrade
from hopsd.ledger.schema_head import at_head, script_head


def test_script_head_is_alembics() -> None:
    assert script_head() == head_revision()


def test_at_head_only_at_the_newest_revision(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    engine = make_engine(url)
    try:
        assert not at_head(engine)  # empty: no alembic_version table
        upgrade(url, "0001")
        assert not at_head(engine)
        upgrade(url)
        assert at_head(engine)
    finally:
        engine.dispose()


def test_two_heads_are_not_clear_cut(tmp_path: Path) -> None:
    for name, rev, down in (("a", "0001", None), ("b", "0002", "0001"), ("c", "0003", "0001")):
        down_text = "None" if down is None else f'"{down}"'
        (tmp_path / f"{name}.py").write_text(
            f'revision: str = "{rev}"\ndown_revision: str | None = {down_text}\n'
        )
    assert script_head((tmp_path,)) is None
    (tmp_path / "c.py").write_text('revision: str = "0003"\ndown_revision = "0002"\n')
    assert script_head((tmp_path,)) == "0003"
