"""The refusal vocabulary is closed: every code-shaped string the package holds (``aais.*``,
``agui.*``, ``inbox.*``, ``http.error``) is a catalogued code (or a trace or stream-event name,
catalogued where they are defined), and every code of the catalogue is sent somewhere."""

from __future__ import annotations

import ast
import importlib.util
import re
import typing
from pathlib import Path

import pytest

from aais_agui.http.sse import GAP_EVENT, SIGNED_OUT_EVENT
from aais_langgraph.authority import TERMINAL
from aais_langgraph.observability import ATTRIBUTES, traces
from aais_langgraph.protocol import Outcome, refusals
from aais_langgraph.protocol.refusals import (
    REFUSALS,
    Refusal,
    agui_refusal,
    http_refusal,
    ndjson_refusal,
    outcome_refusal,
    websocket_close_code,
    websocket_refusal,
)

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "aais_langgraph" / "protocol" / "refusals.py"
CODE = re.compile(r"^(?:aais\.[a-z_.]+|agui\.[a-z_]+|inbox\.[a-z_]+|http\.error)$")
"""A code-shaped string (other ``http.*`` strings are ASGI message types and module paths)."""
JS_CODE = re.compile(r"""["'`]((?:aais|agui|inbox)\.[a-z_.]+)["'`]""")

SPANS = {traces.REQUEST_SPAN, traces.DECIDE_SPAN, traces.RESUME_SPAN, traces.DELIVERY_SPAN}
OTHER_NAMES = set(ATTRIBUTES) | SPANS | {GAP_EVENT, SIGNED_OUT_EVENT}
"""``aais.*`` strings that are not refusal codes: span and attribute names (catalogued in
:mod:`aais_langgraph.observability`) and the event names of the SSE stream."""

CONSTANTS = {
    name: getattr(refusals, name)
    for name in refusals.__all__
    if isinstance(getattr(refusals, name), str) and CODE.match(getattr(refusals, name))
}


def _sources() -> list[Path]:
    found = [
        path
        for package in ("aais_langgraph", "aais_agui")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != CATALOGUE
    ]
    return found


def _scan() -> tuple[set[str], set[str], bool]:
    """The ``aais.*`` string literals outside the catalogue, the catalogue constants imported
    from it, and whether :func:`outcome_refusal` is called."""
    literals: set[str] = set()
    imported: set[str] = set()
    outcomes = False
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if CODE.match(node.value):
                    literals.add(node.value)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith(
                ("protocol", "refusals")
            ):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Attribute) and node.attr in CONSTANTS:
                if isinstance(node.value, ast.Name) and node.value.id == "refusals":
                    imported.add(node.attr)
            elif isinstance(node, ast.Name) and node.id == "outcome_refusal":
                outcomes = True
    for path in sorted((ROOT / "aais_agui" / "static").glob("*.js")):
        literals.update(JS_CODE.findall(path.read_text(encoding="utf-8")))
    return literals, imported & set(CONSTANTS), outcomes


def test_every_aais_string_in_the_package_is_catalogued() -> None:
    literals, _, _ = _scan()
    assert literals - set(REFUSALS) - OTHER_NAMES == set()


def test_every_catalogued_code_is_sent_somewhere() -> None:
    literals, imported, outcomes = _scan()
    used = literals | {CONSTANTS[name] for name in imported}
    if outcomes:
        used |= {f"aais.{outcome}" for outcome in typing.get_args(Outcome)} - {
            f"aais.{outcome}" for outcome in TERMINAL
        }
    assert set(REFUSALS) - used == set()


def test_the_docs_page_is_rendered_from_the_catalogue() -> None:
    script = ROOT / "scripts" / "refusals_page.py"
    spec = importlib.util.spec_from_file_location("refusals_page", script)
    assert spec is not None and spec.loader is not None
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    written = (ROOT / "docs" / "refusals.md").read_text(encoding="utf-8")
    assert written == page.render(), "run: python scripts/refusals_page.py"
    assert "refusals.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_every_code_has_a_constant_and_a_one_sentence_meaning() -> None:
    assert set(CONSTANTS.values()) == set(REFUSALS)
    for code, entry in REFUSALS.items():
        assert entry.code == code
        assert entry.meaning.endswith(".") and entry.meaning[0].isupper(), code
        assert 400 <= entry.http_status < 600, code
        assert entry.transports, code


def test_refusal_codes_do_not_collide_with_trace_or_event_names() -> None:
    assert set(REFUSALS) & (set(ATTRIBUTES) | SPANS | {GAP_EVENT}) == set()


@pytest.mark.parametrize("outcome", ["conflict", "stale", "invalid", "expired"])
def test_an_outcome_that_refuses_has_a_code(outcome: str) -> None:
    assert outcome_refusal(outcome) == f"aais.{outcome}"


def test_a_terminal_outcome_that_never_refuses_has_no_code() -> None:
    with pytest.raises(KeyError, match="outcome"):
        outcome_refusal("approved")


def test_each_transport_reads_the_catalogue() -> None:
    assert http_refusal("aais.forbidden", "no") == (
        403,
        {"code": "aais.forbidden", "message": "no"},
    )
    assert http_refusal("aais.limit_exceeded", "m")[0] == 429
    assert agui_refusal("aais.thread_busy", "m") == {"code": "aais.thread_busy", "message": "m"}
    assert websocket_refusal("aais.invalid_envelope", "/decision", "m", frame=3) == {
        "error": {
            "code": "aais.invalid_envelope",
            "pointer": "/decision",
            "message": "m",
            "frame": 3,
        }
    }
    assert websocket_close_code("aais.ledger_integrity") == 1011
    assert websocket_close_code("aais.body_too_large") == 1009
    assert websocket_close_code("aais.unauthenticated") == 1008
    assert ndjson_refusal("aais.line_too_large", "", "m", line=2) == {
        "error": {"code": "aais.line_too_large", "pointer": "", "message": "m", "line": 2}
    }


@pytest.mark.parametrize(
    "send",
    [
        lambda: http_refusal("aais.nope", "m"),
        lambda: agui_refusal("aais.nope", "m"),
        lambda: websocket_refusal("aais.nope", "", "m", frame=1),
        lambda: websocket_close_code("aais.nope"),
        lambda: ndjson_refusal("aais.nope", "", "m", line=1),
    ],
)
def test_a_code_outside_the_catalogue_is_refused_without_echoing_it(send: typing.Any) -> None:
    with pytest.raises(KeyError) as raised:
        send()
    assert "nope" not in str(raised.value)


def test_the_refusal_exceptions_share_one_base_and_keep_their_own() -> None:
    from aais_agui.http.decisions import DecisionRefused
    from aais_agui.resume_plan import ResumeRejected
    from aais_langgraph.authority import ForbiddenError, RequestLimitError, UnknownRequestError
    from aais_langgraph.ledger import LedgerIntegrityError
    from aais_langgraph.protocol import AAISValidationError

    forbidden = ForbiddenError("decide", "")
    assert isinstance(forbidden, Refusal) and isinstance(forbidden, PermissionError)
    assert forbidden.code == "aais.forbidden"
    limited = RequestLimitError("/request", "too many")
    assert isinstance(limited, Refusal) and isinstance(limited, AAISValidationError)
    assert limited.code == "aais.limit_exceeded" and limited.pointer == "/request"
    unknown = UnknownRequestError()
    assert isinstance(unknown, Refusal) and isinstance(unknown, LookupError)
    assert unknown.code == "aais.unknown_request"
    assert unknown.pointer == "/decision/request_id"
    integrity = LedgerIntegrityError("aais_requests", "r1", "no audit entry")
    assert isinstance(integrity, Refusal) and isinstance(integrity, RuntimeError)
    assert integrity.code == "aais.ledger_integrity"
    refused = DecisionRefused(422, "aais.invalid_envelope", "/decision", "m")
    assert isinstance(refused, Refusal) and refused.code in REFUSALS
    rejected = ResumeRejected("aais.partial_resume", "m")
    assert isinstance(rejected, Refusal) and rejected.code in REFUSALS
    for error in (forbidden, limited, unknown, integrity, refused, rejected):
        assert error.code in REFUSALS
