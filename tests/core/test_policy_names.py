"""The configuration checks policy names without importing the policies: the list must be true."""

from __future__ import annotations

import subprocess
import sys

from hopsd.core.policies import BUILTIN_POLICIES, is_policy, policy_names


def test_builtin_names_are_what_the_modules_register() -> None:
    assert set(policy_names()) == BUILTIN_POLICIES


def test_is_policy() -> None:
    assert is_policy("hops-lr") and not is_policy("hops-lifo")


def test_loading_a_config_imports_no_policy() -> None:
    probe = (
        "import sys; from hopsd.config import parse_config; "
        "parse_config(\"[scheduler]\\npolicy = 'gavel'\\n\"); "
        "print(sorted(m for m in sys.modules if m.startswith('hopsd.core.policies.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
