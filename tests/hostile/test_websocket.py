"""Hostile inputs against the AAIS WebSocket profile (``/approvals/ws``) over real uvicorn.

Handshakes (foreign origins, forged or missing credentials, a cookie session
without its CSRF token, bad ``after``) are refused before the connection opens;
frames (oversized, duplicate keys, non-I-JSON, forged actors, edited arguments)
change nothing. After each input nothing is approved, executed or destroyed,
and alice's correct decision still approves and runs the action once.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from aais_langgraph.cli.presenter import IN_REPLY_TO

from .conftest import MAX_BODY, SENTINEL, Probe, Site
from .test_headers import HEADERS, QUERY, header_values
from .test_http_profile import BAD_ENVELOPES, FOREIGN_ORIGINS, _duplicate_key_bodies

CATEGORY = "WebSocket"


def _url(site: Site, query: str = "") -> str:
    return site.url.replace("http://", "ws://") + "/approvals/ws" + query


@contextmanager
def _open(site: Site, query: str = "", **headers: str) -> Iterator[ClientConnection]:
    with connect(_url(site, query), additional_headers=headers, open_timeout=10) as ws:
        first = json.loads(ws.recv(timeout=10))
        assert first["type"] == "approval.snapshot" or "gap" in first
        yield ws


def _reply(ws: ClientConnection) -> dict[str, Any]:
    """The next frame that is not on the authority's stream: a reply or an error."""
    while True:
        document: dict[str, Any] = json.loads(ws.recv(timeout=15))
        if "error" in document or str(document.get("stream", "")).startswith("aais-langgraph.ws_"):
            return document


def _refused(site: Site, query: str, headers: dict[str, str]) -> tuple[int, str]:
    """(status, body) of a refused handshake; fails if the connection opened."""
    try:
        connect(_url(site, query), additional_headers=headers, open_timeout=10).close()
    except InvalidStatus as refused:
        return refused.response.status_code, refused.response.body.decode(errors="replace")
    raise AssertionError(f"the handshake was accepted: {query} {sorted(headers)}")


ALICE = {"Authorization": "Bearer alice-token"}


def test_hostile_handshakes_are_refused_before_the_connection_opens(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    origins = [*FOREIGN_ORIGINS, site.url.replace("127.0.0.1", "localhost"), site.url + "/"]
    cases: list[tuple[str, str, dict[str, str], int]] = [
        (f"origin {origin}", "", {**ALICE, "Origin": origin}, 403) for origin in origins
    ]
    cases += [
        ("cross-site fetch metadata", "", {**ALICE, "Sec-Fetch-Site": "cross-site"}, 403),
        ("no credentials", "", {}, 401),
        ("wrong token", "", {"Authorization": "Bearer alice-token-x"}, 401),
        ("token prefix", "", {"Authorization": "Bearer alice"}, 401),
        ("token in a cookie", "", {"Cookie": "session=alice-token"}, 401),
        ("carol without csrf", "", {"Cookie": "session=carol-session"}, 403),
        (
            "carol with a csrf cookie but no token",
            "",
            {"Cookie": "session=carol-session; aais_csrf=abc"},
            403,
        ),
        (
            "carol with a wrong token",
            "?csrf=abd",
            {"Cookie": "session=carol-session; aais_csrf=abc"},
            403,
        ),
        ("carol with a token but no cookie", "?csrf=abc", {"Cookie": "session=carol-session"}, 403),
        ("a sentinel token", "", {"Authorization": "Bearer " + SENTINEL}, 401),
    ]
    for after in ("-1", "\xb2", "\xb9\xb2\xb3", "1e3", "0x10", "1_000", "9" * 40, SENTINEL):
        cases.append((f"after={after!r}", f"?after={quote(after)}", ALICE, 400))
    cases.append(("after past 2^53", "?after=9007199254740992", ALICE, 400))
    for what, query, headers, expected in cases:
        status, body = _refused(site, query, headers)
        assert status == expected, (what, status, body)
        probe.frame(body, what, server_error=status >= 500)
    probe.finish()
    probe.still_answerable()


def test_oversized_frames_close_with_1009_and_record_nothing(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    for extra in (1, 1000, MAX_BODY):
        body = paused.decided()
        body["extensions"] = {"example.org/pad": "x" * (MAX_BODY + extra)}
        for kind in ("text", "binary"):
            with _open(site, **ALICE) as ws:
                text = json.dumps(body)
                ws.send(text if kind == "text" else text.encode())
                with pytest.raises(ConnectionClosed) as closed:
                    _reply(ws)
            code = closed.value.rcvd.code if closed.value.rcvd else None
            assert code == 1009, (extra, kind, code)
            probe.frame(str(closed.value.rcvd), f"{kind} frame oversized by {extra}")
    probe.finish()
    probe.still_answerable()


def test_bad_frames_get_errors_naming_the_field_and_change_nothing(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    frames: list[tuple[str, str | bytes]] = []
    for name, mutate in BAD_ENVELOPES:
        frames.append(
            (f"bad envelope: {name}", json.dumps(mutate(copy.deepcopy(paused.decided()))))
        )
    frames += [(f"duplicate key: {n}", t) for n, t in _duplicate_key_bodies(paused.decided())]
    edited = paused.decided()
    edited["decision"]["arguments"] = {"path": SENTINEL}
    frames.append(("edited arguments inside the decision", json.dumps(edited)))
    edited_action = paused.decided()
    edited_action["decision"]["action"] = {"arguments": {"path": SENTINEL}}
    frames.append(("an edited action inside the decision", json.dumps(edited_action)))
    frames += [
        ("NaN", '{"aais": NaN}'),
        ("big int", '{"sequence": 123456789012345678901234567890}'),
        ("lone surrogate", '{"aais": "\\ud800"}'),
        ("deep", "[" * 5000 + "]" * 5000),
        ("not json", SENTINEL),
        ("empty", ""),
        ("binary", SENTINEL.encode()),
        (
            "a snapshot instead of a decision",
            json.dumps({"aais": "1.0", "type": "approval.snapshot"}),
        ),
    ]
    with _open(site, **ALICE) as ws:
        for index, (what, frame) in enumerate(frames, start=1):
            ws.send(frame)
            reply = _reply(ws)
            if "error" in reply:
                assert reply["error"]["frame"] == index
            else:  # well-formed but wrong (e.g. a zeroed digest): refused as a resolution
                assert reply["resolution"]["outcome"] in ("stale", "invalid"), (what, reply)
                assert reply["extensions"][IN_REPLY_TO]["frame"] == index
            probe.frame(json.dumps(reply), what)
        edits = [json.loads(_reply_to(ws, edited)), json.loads(_reply_to(ws, edited_action))]
    assert [e["error"]["pointer"] for e in edits] == ["/decision/arguments", "/decision/action"]
    probe.finish()
    probe.still_answerable()


def _reply_to(ws: ClientConnection, body: dict[str, Any]) -> str:
    ws.send(json.dumps(body))
    return json.dumps(_reply(ws))


def test_forged_actors_in_frames_are_not_trusted(site: Site) -> None:
    """Mallory's and bob's connections send decisions naming alice: judged as themselves
    (refused by policy: only alice may approve) or refused as malformed; still pending."""
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    body = paused.decided()
    assert body["decision"]["actor"]["id"] == "alice"
    for token in ("mallory-token", "bob-token"):
        with _open(site, Authorization=f"Bearer {token}") as ws:
            for actor in (body["decision"]["actor"], {"id": "alice", "type": "service"}):
                forged = copy.deepcopy(body)
                forged["decision"]["actor"] = actor
                ws.send(json.dumps(forged))
                reply = _reply(ws)
                outcome = reply.get("resolution", {}).get("outcome")
                assert "error" in reply or outcome == "invalid", json.dumps(reply)
                probe.frame(json.dumps(reply), f"forged actor via {token}: {actor['type']}")
    probe.finish()
    probe.still_answerable()


def test_no_handshake_header_or_query_value_is_a_server_error(site: Site) -> None:
    """Every header and query parameter the app reads, fuzzed on the WebSocket handshake."""
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        headers=st.dictionaries(st.sampled_from(HEADERS), header_values, max_size=4),
        query=st.dictionaries(st.sampled_from(QUERY), header_values, max_size=2),
        authenticated=st.booleans(),
    )
    @example(headers={}, query={"after": "\xb2"}, authenticated=True)
    @example(headers={"origin": "http://[::1]"}, query={}, authenticated=True)
    def handshake(headers: dict[str, str], query: dict[str, str], authenticated: bool) -> None:
        sent = dict(ALICE) if authenticated else {}
        sent.update(headers)
        what = f"handshake headers={sorted(headers)} query={sorted(query)}"
        search = "?" + "&".join(f"{k}={quote(v)}" for k, v in query.items()) if query else ""
        try:
            with connect(_url(site, search), additional_headers=sent, open_timeout=10) as ws:
                text = str(ws.recv(timeout=10))
        except InvalidStatus as refused:
            status = refused.response.status_code
            probe.frame(
                refused.response.body.decode(errors="replace"), what, server_error=status >= 500
            )
            return
        except (WebSocketException, ValueError, UnicodeError):
            return  # the client would not send it (a header it cannot encode)
        probe.frame(text, what)

    handshake()
    probe.finish()
    probe.still_answerable()


def test_frames_are_judged_exactly_as_http_bodies(site: Site) -> None:
    """One function records both: the same input gets the same code, message or outcome."""
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    bodies = [json.dumps(mutate(copy.deepcopy(paused.decided()))) for _, mutate in BAD_ENVELOPES]
    bodies += [text for _, text in _duplicate_key_bodies(paused.decided())]
    edited = paused.decided()
    edited["decision"]["arguments"] = {"path": SENTINEL}
    stale = paused.decided()
    stale["decision"]["action_digest"] = "sha256:" + "3" * 64
    bodies += [json.dumps(edited), json.dumps(stale), '{"aais": NaN}', SENTINEL]
    path = f"/approvals/{paused.request_ids[0]}/decisions"
    with site.client() as client, _open(site, **ALICE) as ws:
        for body in bodies:
            response = client.post(path, content=body, headers={"Content-Type": "application/json"})
            ws.send(body)
            frame = _reply(ws)
            http = response.json()
            probe.frame(json.dumps(frame), "the same input over HTTP and WebSocket")
            if "does not match the request in the path" in json.dumps(http):
                continue  # only HTTP has a path naming the request
            if "error" in frame:
                assert http["error"] == {
                    "code": frame["error"]["code"],
                    "message": frame["error"]["message"],
                }
            else:
                assert frame["resolution"]["outcome"] == http["resolution"]["outcome"]
                assert frame["resolution"]["message"] == http["resolution"]["message"]
    probe.finish()
    probe.still_answerable()
