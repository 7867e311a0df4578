"""``setup()`` refuses a ledger another version of aais-langgraph wrote, on SQLite and
PostgreSQL: nothing before this schema was released, so none is upgraded."""

from __future__ import annotations

import pytest

from aais_langgraph.ledger import LedgerVersionError

from .test_tamper import Tampered, tampered  # noqa: F401 - the fixture


def _set_version(state: Tampered, version: int) -> None:
    if state.backend == "sqlite":
        state.raw(f"UPDATE aais_meta SET value = '{version}' WHERE key = 'schema_version'")
    else:
        state.raw(f"UPDATE aais_meta SET schema_version = {version}")


def test_a_newer_schema_is_still_refused(tampered: Tampered) -> None:  # noqa: F811
    _set_version(tampered, 99)
    with pytest.raises(RuntimeError, match="schema version 99"):
        tampered.authority.ledger.setup()


def test_an_earlier_unreleased_schema_is_refused_naming_the_field(tampered: Tampered) -> None:  # noqa: F811
    _set_version(tampered, 3)
    with pytest.raises(LedgerVersionError, match=r"^schema_version: "):
        tampered.authority.ledger.setup()
