"""What a test needs from the machine (a model, a data file, an optional package).

A bare ``pytest`` skips a test whose model or data is missing; ``make test`` passes ``--strict-missing``,
which turns those skips into failures, so a CI machine that lost a model never goes green by skipping.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

STRICT: dict[str, bool] = {"on": False}  # set by conftest.py from --strict-missing


def missing(reason: str) -> None:
    """Skip the test (fail it under ``--strict-missing``) because ``reason`` is missing."""
    if STRICT["on"]:
        pytest.fail(f"missing: {reason} (--strict-missing: make test installs every model and data file)")
    pytest.skip(reason, allow_module_level=True)


def require_module(name: str, hint: str) -> ModuleType:
    """Import ``name`` or report it missing with the install ``hint``."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"{name} not installed ({hint})")
        raise  # unreachable: missing() raises
