"""Access to the backend-neutral ledger tests in tests/ledger, whatever pytest names them."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

CONTRACT_DIR = Path(__file__).parents[1] / "ledger"


def contract_module(stem: str) -> ModuleType:
    """The module ``tests/ledger/<stem>.py`` under the package name pytest gave it."""
    package = ".".join([*__name__.split(".")[:-2], "ledger"])  # "ledger" or "tests.ledger"
    return importlib.import_module(f"{package}.{stem}")
