"""Grants: the session view (its session grants plus persistent ones) and revocation."""

from __future__ import annotations

from aais_langgraph.ledger import Grant, Ledger

from .envelopes import approval, grant_for, request_envelope


def _grant(ledger: Ledger, request_id: str, *, session_id: str, action: str, scope: str) -> Grant:
    requested = request_envelope(request_id, session_id=session_id, action_name=action)
    ledger.add_request(requested)
    grant = grant_for(requested, grant_id=f"grt_{request_id}", scope=scope)
    ledger.record_resolution(approval(requested, resolution_id=f"res_{request_id}", grant=grant))
    return grant


def test_list_grants_for_a_session_includes_persistent_grants(ledger: Ledger) -> None:
    mine = _grant(ledger, "apr_1", session_id="s1", action="shell", scope="session")
    other = _grant(ledger, "apr_2", session_id="s2", action="shell", scope="session")
    everywhere = _grant(ledger, "apr_3", session_id="s2", action="shell", scope="persistent")

    assert ledger.list_grants(session_id="s1") == [mine, everywhere]
    assert ledger.list_grants(session_id="s2") == [other, everywhere]
    assert ledger.list_grants() == [mine, other, everywhere]


def test_list_grants_filters_by_action_name(ledger: Ledger) -> None:
    shell = _grant(ledger, "apr_1", session_id="s1", action="shell", scope="session")
    _grant(ledger, "apr_2", session_id="s1", action="http_get", scope="persistent")

    assert ledger.list_grants(session_id="s1", action_name="shell") == [shell]
    assert ledger.list_grants(action_name="write_file") == []


def test_revoked_grant_is_hidden_unless_asked_for(ledger: Ledger) -> None:
    grant = _grant(ledger, "apr_1", session_id="s1", action="shell", scope="session")

    assert ledger.revoke_grant(grant.grant_id, now=500.0) is True

    assert ledger.list_grants(session_id="s1") == []
    revoked = ledger.list_grants(session_id="s1", include_revoked=True)
    assert [(g.grant_id, g.revoked_at) for g in revoked] == [(grant.grant_id, 500.0)]


def test_revoke_is_audited_once(ledger: Ledger) -> None:
    grant = _grant(ledger, "apr_1", session_id="s1", action="shell", scope="session")

    ledger.revoke_grant(grant.grant_id, now=500.0)

    assert ledger.revoke_grant(grant.grant_id, now=600.0) is False
    kinds = [entry.kind for entry in ledger.audit_entries()]
    assert kinds.count("revoked") == 1
    assert ledger.list_grants(include_revoked=True)[0].revoked_at == 500.0


def test_revoking_an_unknown_grant_returns_false(ledger: Ledger) -> None:
    assert ledger.revoke_grant("grt_missing", now=1.0) is False
    assert ledger.audit_tip() is None
