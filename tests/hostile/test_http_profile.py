"""Hostile inputs against the AAIS HTTP profile (``POST /approvals/{id}/decisions``) over real HTTP.

Each test pauses real threads, throws its inputs at them, checks after every
input that nothing was approved, executed or destroyed, and finally shows that
alice's correct decision still approves and runs the action once.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aais_langgraph.protocol import AAISValidationError, ApprovalDecided, parse_envelope

from .conftest import MAX_BODY, SENTINEL, Paused, Probe, Site

CATEGORY = "HTTP profile"
JSON = {"Content-Type": "application/json"}

Mutation = Callable[[dict[str, Any]], Any]


def _set(path: str, value: Any) -> Mutation:
    def mutate(body: dict[str, Any]) -> Any:
        *parents, last = path.split("/")
        target = body
        for part in parents:
            target = target[part]
        target[last] = value
        return body

    return mutate


def _drop(path: str) -> Mutation:
    def mutate(body: dict[str, Any]) -> Any:
        *parents, last = path.split("/")
        target = body
        for part in parents:
            target = target[part]
        del target[last]
        return body

    return mutate


def _nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


BAD_ENVELOPES: list[tuple[str, Mutation]] = [
    *[
        (f"drop {path}", _drop(path))
        for path in (
            "aais",
            "type",
            "id",
            "occurred_at",
            "decision",
            "decision/request_id",
            "decision/action_digest",
            "decision/decision",
            "decision/scope",
            "decision/decided_at",
            "decision/id",
        )
    ],
    ("aais 2.0", _set("aais", "2.0")),
    ("type requested", _set("type", "approval.requested")),
    ("type resolved", _set("type", "approval.resolved")),
    ("decision maybe", _set("decision/decision", "maybe")),
    ("decision APPROVE", _set("decision/decision", "APPROVE")),
    ("scope forever", _set("decision/scope", "forever")),
    ("scope global", _set("decision/scope", "global")),
    ("scope sentinel", _set("decision/scope", SENTINEL)),
    ("decision sentinel", _set("decision/decision", SENTINEL)),
    ("unknown field sentinel", _set("decision/unknown", SENTINEL)),
    ("digest sentinel", _set("decision/action_digest", "sha256:" + SENTINEL)),
    ("actor id sentinel", _set("decision/actor", {"id": SENTINEL, "type": SENTINEL})),
    ("digest zeros", _set("decision/action_digest", "sha256:" + "0" * 64)),
    ("digest upper", _set("decision/action_digest", "SHA256:" + "A" * 64)),
    ("digest short", _set("decision/action_digest", "sha256:abc")),
    ("decided_at garbage", _set("decision/decided_at", "yesterday")),
    ("occurred_at leap", _set("occurred_at", "2026-02-30T00:00:00Z")),
    ("unknown top-level field", _set("approved", True)),
    ("unknown decision field", _set("decision/approved", True)),
    ("unprefixed extension", _set("extensions", {"x": 1})),
    ("sequence negative", _set("sequence", -1)),
    ("sequence huge", _set("sequence", 2**60)),
    ("sequence float", _set("sequence", 1.5)),
    ("sequence string", _set("sequence", "1")),
    ("decision is a list", _set("decision", [])),
    ("decision is null", _set("decision", None)),
    ("request_id empty", _set("decision/request_id", "")),
    ("request_id other", _set("decision/request_id", "apr_other")),
    ("actor not an object", _set("decision/actor", "alice")),
    ("actor type robot", _set("decision/actor", {"id": "alice", "type": "robot"})),
    ("nested extension bomb", _set("extensions", {"example.org/x": _nest(300)})),
    ("lone surrogate", _set("decision/reason", "\ud800")),
    ("body is a list", lambda body: [body]),
    ("body is a string", lambda body: "approve"),
    ("body is null", lambda body: None),
    ("body is a number", lambda body: 1),
    ("body is true", lambda body: True),
    ("body is empty", lambda body: {}),
]

RAW_BODIES: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("not json", b"approve"),
    ("truncated", b'{"aais": "1.0", "type": "approval.decided"'),
    ("NaN", b'{"aais": NaN}'),
    ("Infinity", b'{"sequence": Infinity}'),
    ("big int", b'{"sequence": 123456789012345678901234567890}'),
    ("utf-16", '{"aais": "1.0"}'.encode("utf-16")),
    ("latin-1 junk", b'{"aais": "\xff\xfe"}'),
    ("bom", b'\xef\xbb\xbf{"aais": "1.0"}'),
    ("nul", b'{"aais": "1.0\x00"}'),
    ("deep", b"[" * 5000 + b"]" * 5000),
]


def _duplicate_key_bodies(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """The decided envelope's JSON text with one key repeated (the approving value last)."""
    text = json.dumps(body)
    denied = json.dumps(dict(body["decision"], decision="deny"))
    replacements = [
        ("decision twice", '"decision": "approve"', '"decision": "deny", "decision": "approve"'),
        ("type twice", '"type": "approval.decided"', '"type": "x", "type": "approval.decided"'),
        (
            "digest twice",
            '"action_digest": ',
            f'"action_digest": "sha256:{"0" * 64}", "action_digest": ',
        ),
        ("scope twice", '"scope": "once"', '"scope": "session", "scope": "once"'),
        ("actor twice", '"actor": ', '"actor": {"id": "mallory", "type": "human"}, "actor": '),
    ]
    for name, old, new in replacements:
        assert old in text, name
        yield name, text.replace(old, new, 1)
    yield "decision object twice", '{"decision": ' + denied + ", " + text[1:]
    yield "aais twice", text[:-1] + ', "aais": "1.0"}'


def _post(client: httpx.Client, paused: Paused, body: Any, **options: Any) -> httpx.Response:
    return client.post(f"/approvals/{paused.request_ids[0]}/decisions", **body, **options)


def _answers_as_offered(body: Any, paused: Paused) -> bool:
    try:
        decided = parse_envelope(json.dumps(body), expected=ApprovalDecided)
    except (AAISValidationError, ValueError):
        return False
    original = paused.decided()["decision"]
    mine = decided.decision
    return (mine.request_id, mine.action_digest, mine.decision, mine.scope) == (
        original["request_id"],
        original["action_digest"],
        original["decision"],
        original["scope"],
    )


def test_bad_envelopes_change_nothing(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    with site.client() as client:
        for name, mutate in BAD_ENVELOPES:
            body = json.dumps(mutate(copy.deepcopy(paused.decided()))).encode()
            response = _post(client, paused, {"content": body, "headers": JSON})
            assert response.status_code in (409, 413, 422), (name, response.status_code)
            probe.response(response, f"bad envelope: {name}")
        for name, raw in RAW_BODIES:
            response = _post(client, paused, {"content": raw, "headers": JSON})
            assert 400 <= response.status_code < 500, (name, response.status_code)
            probe.response(response, f"raw body: {name}")
    probe.finish()
    probe.still_answerable()


def test_duplicate_keys_are_refused(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    with site.client() as client:
        for name, text in _duplicate_key_bodies(paused.decided()):
            response = _post(client, paused, {"content": text.encode(), "headers": JSON})
            assert response.status_code == 422, (name, response.status_code)
            probe.response(response, f"duplicate key: {name}")
    probe.finish()
    probe.still_answerable()


def test_oversized_bodies_are_refused(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])

    def chunks(size: int) -> Iterator[bytes]:
        for _ in range(size // 4096 + 1):
            yield b" " * 4096

    with site.client() as client:
        for extra in (1, 1000, MAX_BODY, 4 * MAX_BODY):
            body = paused.decided()
            body["extensions"] = {"example.org/pad": "x" * (MAX_BODY + extra)}
            response = _post(client, paused, {"json": body})
            assert response.status_code == 413
            probe.response(response, f"oversized by {extra}")
        for size in (MAX_BODY + 1, 3 * MAX_BODY):
            response = _post(client, paused, {"content": chunks(size), "headers": JSON})
            assert response.status_code == 413
            probe.response(response, f"chunked {size} bytes without a length")
        # Just under the limit but one decision padded with whitespace: parsed, refused as stale.
        stale = paused.decided()
        stale["decision"]["action_digest"] = "sha256:" + "1" * 64
        padded = json.dumps(stale)
        response = _post(
            client, paused, {"content": padded.encode() + b" " * 1000, "headers": JSON}
        )
        probe.response(response, "padded stale decision")
    probe.finish()
    probe.still_answerable()


def test_forged_actors_in_bodies_are_not_trusted(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    body = paused.decided()  # names alice
    assert body["decision"]["actor"]["id"] == "alice"
    attempts: list[tuple[str, dict[str, str]]] = [
        ("mallory naming alice", {"Authorization": "Bearer mallory-token"}),
        ("bob naming alice", {"Authorization": "Bearer bob-token"}),
        ("no credentials naming alice", {}),
        ("wrong token", {"Authorization": "Bearer alice-token-x"}),
        ("token prefix", {"Authorization": "Bearer alice"}),
        ("basic scheme", {"Authorization": "Basic YWxpY2U6YWxpY2U="}),
        ("empty bearer", {"Authorization": "Bearer"}),
        ("token in a cookie", {"Cookie": "session=alice-token"}),
        ("carol's cookie without csrf", {"Cookie": "session=carol-session"}),
    ]
    with site.client(token=None) as client:
        for name, headers in attempts:
            for actor in (body["decision"]["actor"], {"id": "alice", "type": "service"}):
                forged = copy.deepcopy(body)
                forged["decision"]["actor"] = actor
                response = _post(client, paused, {"json": forged, "headers": headers})
                assert response.status_code in (401, 403, 422), (name, response.status_code)
                probe.response(response, f"forged actor: {name}")
    probe.finish()
    probe.still_answerable()


FOREIGN_ORIGINS = [
    "https://evil.example",
    "null",
    "http://127.0.0.1",
    "http://localhost",
    "https://inbox.example.evil.example",
    "https://inbox.example:444",
    "http://inbox.example",
    "https://evil.example@inbox.example",
    "https://inbox.example@evil.example",
    "https://inbox.example/",
    "file://",
    "chrome-extension://abcdef",
]


def test_foreign_origins_are_refused(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    origins = [*FOREIGN_ORIGINS, site.url.replace("127.0.0.1", "localhost"), site.url + "/"]
    with site.client() as client:
        for origin in origins:
            response = _post(
                client, paused, {"json": paused.decided(), "headers": {"Origin": origin}}
            )
            assert response.status_code == 403, (origin, response.status_code)
            probe.response(response, f"origin {origin}")
            agui = client.post(
                "/agent",
                json={"threadId": paused.thread_id, "runId": "r", "messages": []},
                headers={"Origin": origin},
            )
            assert agui.status_code == 403, (origin, agui.status_code)
            probe.response(agui, f"AG-UI origin {origin}")
    probe.finish()
    probe.still_answerable()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


def test_random_envelope_mutations_change_nothing(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    keys = ["aais", "type", "id", "decision", "sequence", "extensions"]
    decision_keys = ["request_id", "action_digest", "decision", "scope", "actor", "id", "reason"]
    client = site.client()

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.sampled_from(keys), st.sampled_from(decision_keys), json_values, st.booleans())
    def send(key: str, decision_key: str, value: Any, inner: bool) -> None:
        body = paused.decided()
        if inner:
            body["decision"][decision_key] = value
        else:
            body[key] = value
        if _answers_as_offered(body, paused):
            return  # a well-formed approval of what was offered: alice may send that
        response = _post(client, paused, {"json": body})
        probe.response(response, f"mutation {key if not inner else 'decision/' + decision_key}")

    try:
        send()
    finally:
        client.close()
    probe.finish()
    probe.still_answerable()
