"""Over HTTP, a forged row in the ledger is refused with ``aais.ledger_integrity``; nothing runs."""

from __future__ import annotations

import sqlite3

import httpx

from aais_langgraph.authority.resolutions import resolution_envelope
from aais_langgraph.ledger.records import dump_json
from aais_langgraph.protocol import ApprovalRequested, utc_now

from .transports.test_http import Site, client, decision, pause, post_decision, request_id, site  # noqa: F401


def test_a_decision_on_a_request_with_a_forged_resolution_is_refused(
    client: httpx.Client,  # noqa: F811
    site: Site,  # noqa: F811
) -> None:
    thread_id, interrupt = pause(client)
    requested = ApprovalRequested.from_data(interrupt["metadata"]["aais"])
    forged = resolution_envelope(
        requested.request, outcome="approved", message="Approved.", now=utc_now(), sequence=0
    )
    ledger_conn = site.authority.ledger._conn  # type: ignore[attr-defined]
    path = ledger_conn.execute("PRAGMA database_list").fetchone()[2]
    with sqlite3.connect(path) as raw:
        raw.execute(
            "INSERT INTO aais_resolutions (request_id, envelope, decision_fingerprint) "
            "VALUES (?, ?, NULL)",
            (request_id(interrupt), dump_json(forged.to_json())),
        )

    response = post_decision(client, interrupt, decision(interrupt))

    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "aais.ledger_integrity"
    assert "aais_resolutions" in error["message"] and request_id(interrupt) in error["message"]
    assert site.effects.list(thread_id) == []
