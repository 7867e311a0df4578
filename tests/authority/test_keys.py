"""The authority key: from the argument, ``AAIS_AUTHORITY_KEY_FILE`` or ``AAIS_AUTHORITY_KEY``;
it seals rows and is never written to the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from aais_langgraph.authority import ApprovalAuthority, load_authority_key
from aais_langgraph.ledger import SqliteLedger

from .support import START, FakeClock, decision, new_request

KEY_TEXT = "correct horse battery staple, twice over"


def round_trip(authority: ApprovalAuthority) -> str:
    requested = new_request(authority)
    authority.decide(decision(requested, scope="session"))
    return requested.request.id


def test_the_key_comes_from_the_environment(
    sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AAIS_AUTHORITY_KEY", KEY_TEXT)
    with SqliteLedger.from_path(sqlite_path) as ledger:
        ledger.setup()
        request_id = round_trip(ApprovalAuthority(ledger, clock=FakeClock(START)))
        stored = ledger.get_request(request_id)
        resolution = ledger.get_resolution(request_id)
        [grant] = ledger.list_grants()
    assert stored is not None and resolution is not None
    for mac in (stored.mac, resolution.mac, grant.mac):
        assert mac is not None and mac.startswith("hmac-sha256:")
    assert KEY_TEXT.encode() not in sqlite_path.read_bytes()


def test_the_key_comes_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "authority.key"
    key_file.write_bytes(b"\x01" * 40 + b"\n")
    monkeypatch.setenv("AAIS_AUTHORITY_KEY_FILE", str(key_file))
    assert load_authority_key() == b"\x01" * 40


def test_both_variables_set_is_an_error_naming_them() -> None:
    with pytest.raises(ValueError, match="AAIS_AUTHORITY_KEY, AAIS_AUTHORITY_KEY_FILE"):
        load_authority_key({"AAIS_AUTHORITY_KEY": KEY_TEXT, "AAIS_AUTHORITY_KEY_FILE": "/k"})


def test_a_short_key_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as raised:
        load_authority_key({"AAIS_AUTHORITY_KEY": "hunter2"})
    assert "hunter2" not in str(raised.value)
    with pytest.raises(ValueError):
        ApprovalAuthority(key=b"short")


def test_an_unreadable_key_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="AAIS_AUTHORITY_KEY_FILE"):
        load_authority_key({"AAIS_AUTHORITY_KEY_FILE": str(tmp_path / "missing.key")})


def test_no_key_configured_means_no_seals(sqlite_path: Path) -> None:
    assert load_authority_key({}) is None
    with SqliteLedger.from_path(sqlite_path) as ledger:
        ledger.setup()
        request_id = round_trip(ApprovalAuthority(ledger, clock=FakeClock(START)))
        stored = ledger.get_request(request_id)
    assert stored is not None and stored.mac is None


def test_rows_recorded_without_the_key_fail_verification_under_it(sqlite_path: Path) -> None:
    with SqliteLedger.from_path(sqlite_path) as ledger:
        ledger.setup()
        round_trip(ApprovalAuthority(ledger, clock=FakeClock(START)))
        result = ApprovalAuthority(ledger, key=KEY_TEXT).verify_audit()
    assert not result.ok
    assert result.table == "aais_audit"  # the entries are checked first, then the rows
    assert "no seal" in (result.reason or "")
