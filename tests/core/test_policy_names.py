"""The configuration checks policy names without importing the policies: the list must be true."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hopsd.core.policies import BUILTIN_POLICIES, PolicySpec
from hopsd.plugins import is_policy, policy_names, policy_spec

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_builtin_names_are_the_specs_they_load() -> None:
    assert set(BUILTIN_POLICIES) <= set(policy_names())
    for name in BUILTIN_POLICIES:
        spec = policy_spec(name)
        assert isinstance(spec, PolicySpec) and spec.name == name
        assert spec.build().name == name


def test_pyproject_declares_exactly_the_builtin_table() -> None:
    """Other tools list the group from hops's metadata; it must say what hops loads."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["entry-points"]["hops.policies"] == dict(BUILTIN_POLICIES)


def test_is_policy() -> None:
    assert is_policy("hops-lr") and not is_policy("hops-lifo")


def test_loading_a_config_imports_no_policy() -> None:
    probe = (
        "import sys; from hopsd.config import parse_config; "
        "parse_config(\"[scheduler]\\npolicy = 'gavel'\\n[policies.fifo]\\nbackfill = false\\n\"); "
        "print(sorted(m for m in sys.modules if m.startswith('hopsd.core.policies.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["", "-x", "a b", "a,b", "ü"])
def test_a_spec_refuses_a_name_unfit_for_tables_files_and_lists(name: str) -> None:
    from hopsd.core.errors import InvalidInputError
    from hopsd.core.policies import NoSettings

    with pytest.raises(InvalidInputError, match="policy name"):
        PolicySpec(name, lambda _: policy_spec("fifo").build(), NoSettings())
