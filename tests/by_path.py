"""Import a script that is not a package module (a benchmark, the docs' generator) by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_by_path(name: str, path: Path) -> ModuleType:
    """The module at ``path``, registered as ``name``: its dataclasses look their module
    up by name, so it must be in ``sys.modules`` before it runs."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
