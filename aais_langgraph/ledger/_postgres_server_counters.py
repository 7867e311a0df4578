"""Postgres: the server stamps sequences and audit hashes, so no client holds the counters.

One write's rows are built by the client with *holes* where a counter goes (the
sequences, the audit indexes and hashes, and the envelope digests that cover a
sequence), as templates: the exact text :func:`~._records.dump_json` and RFC 8785
would produce, split at each hole. ``aais_stamp(job)`` then, in one statement
sent with the ``COMMIT``, locks the counters' row, fills the holes (SHA-256 in
SQL over the same bytes Python would hash), inserts the rows and moves the
counters. The lock lasts for server work only; the chain, the sequences and
every stored byte are what :class:`~._counters.Counters` would have written, so
``audit verify`` and vouching read them unchanged.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any, TypeVar, cast

from psycopg.rows import tuple_row

from aais_langgraph.protocol import canonical_json, format_timestamp, utc_now

from ._counters import Counters, Cursor, Probe
from ._records import AUDIT_KINDS, plain
from ._rows import INSERT_EVENT
from .audit import GENESIS_HASH
from .integrity import sealed_payload
from .records import AuditEntry, JsonDict, StoredRequest, StoredResolution, dump_json

__all__ = ["STAMP_FUNCTIONS", "StampedCounters"]

# Placeholders the shared code carries where a counter goes: negative, so never a
# real sequence or index, and within I-JSON's safe integers.
SEQUENCE_BASE = -(2**52)
INDEX_BASE = -(2**51)

Piece = str | dict[str, str]
Template = list[Piece]
"""Literal text and holes (``{"v": name}``): ``s<k>`` sequence, ``d<e>`` digest of
event ``e``, ``i<k>``/``p<k>``/``h<k>`` index, previous and own hash of entry ``k``."""

STAMP_FUNCTIONS = (
    # plpgsql, not SQL: its loop has no query to plan, where a SQL function's is planned
    # again in every transaction that calls it.
    """CREATE OR REPLACE FUNCTION aais_fill(tpl jsonb, vals jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT AS $$
    DECLARE
        out text := '';
        p jsonb;
    BEGIN
        FOR i IN 0 .. jsonb_array_length(tpl) - 1 LOOP
            p := tpl -> i;
            IF jsonb_typeof(p) = 'string' THEN
                out := out || (p #>> '{}');
            ELSE
                out := out || (vals -> (p ->> 'v'))::text;
            END IF;
        END LOOP;
        RETURN out;
    END $$""",
    # The counters' row is locked first and held to COMMIT: everything after the lock
    # is as little server work as the rows allow (no statement for a table with no rows).
    """CREATE OR REPLACE FUNCTION aais_stamp(job jsonb) RETURNS jsonb
    LANGUAGE plpgsql AS $$
    DECLARE
        m record;
        vals jsonb := '{}';
        k integer := 0;
        first_idx bigint;
        prev text;
        h text;
        a jsonb;
        n integer := (job ->> 'n')::integer;
        digests jsonb := job -> 'digests';
        audits jsonb := job -> 'audits';
    BEGIN
        SELECT last_sequence, audit_tip_index, audit_tip_hash INTO m FROM aais_meta FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'the ledger schema is missing its meta row; call setup() first';
        END IF;
        FOR i IN 0 .. n - 1 LOOP
            vals := vals || jsonb_build_object('s' || i, m.last_sequence + 1 + i);
        END LOOP;
        FOR e IN 0 .. jsonb_array_length(digests) - 1 LOOP
            vals := vals || jsonb_build_object('d' || e, 'sha256:' || encode(
                sha256(convert_to(aais_fill(digests -> e, vals), 'UTF8')), 'hex'));
        END LOOP;
        first_idx := coalesce(m.audit_tip_index + 1, 0);
        prev := coalesce(m.audit_tip_hash, job ->> 'genesis');
        k := jsonb_array_length(audits);
        FOR e IN 0 .. k - 1 LOOP
            a := audits -> e;
            vals := vals || jsonb_build_object('i' || e, first_idx + e, 'p' || e, prev);
            h := 'sha256:' || encode(
                sha256(convert_to(aais_fill(a -> 'c', vals) || prev, 'UTF8')), 'hex');
            vals := vals || jsonb_build_object('h' || e, h);
            prev := h;
        END LOOP;
        IF k > 0 THEN
            INSERT INTO aais_audit (idx, kind, occurred_at, payload, prev_hash, entry_hash)
                SELECT first_idx + t.o - 1, t.e ->> 'k', t.e ->> 'o',
                       aais_fill(t.e -> 'x', vals),
                       vals ->> ('p' || (t.o - 1)), vals ->> ('h' || (t.o - 1))
                FROM jsonb_array_elements(audits) WITH ORDINALITY AS t(e, o);
        END IF;
        IF jsonb_array_length(job -> 'aais_events') > 0 THEN
            INSERT INTO aais_events (sequence, envelope)
                SELECT (vals ->> (r -> 'sequence' ->> 'v'))::bigint,
                       aais_fill(r -> 'envelope' -> 'x', vals)
                FROM jsonb_array_elements(job -> 'aais_events') AS r;
        END IF;
        IF jsonb_array_length(job -> 'aais_requests') > 0 THEN
            INSERT INTO aais_requests (request_id, sequence, session_id, thread_id, expires_at,
                                       status, envelope, context, audit_index, mac)
                SELECT p.request_id, (vals ->> (r -> 'sequence' ->> 'v'))::bigint,
                       p.session_id, p.thread_id, p.expires_at, p.status,
                       aais_fill(r -> 'envelope' -> 'x', vals), p.context,
                       (vals ->> (r -> 'audit_index' ->> 'v'))::bigint, p.mac
                FROM jsonb_array_elements(job -> 'aais_requests') AS r,
                     jsonb_populate_record(NULL::aais_requests,
                                           r - 'sequence' - 'envelope' - 'audit_index') AS p;
        END IF;
        IF jsonb_array_length(job -> 'aais_resolutions') > 0 THEN
            INSERT INTO aais_resolutions (request_id, envelope, decision_fingerprint,
                                          audit_index, mac)
                SELECT p.request_id, aais_fill(r -> 'envelope' -> 'x', vals),
                       p.decision_fingerprint,
                       (vals ->> (r -> 'audit_index' ->> 'v'))::bigint, p.mac
                FROM jsonb_array_elements(job -> 'aais_resolutions') AS r,
                     jsonb_populate_record(NULL::aais_resolutions,
                                           r - 'envelope' - 'audit_index') AS p;
        END IF;
        IF jsonb_array_length(job -> 'aais_grants') > 0 THEN
            INSERT INTO aais_grants (grant_id, request_id, scope, session_id, action_name,
                                     constraints, created_at, expires_at, revoked_at,
                                     audit_index, mac)
                SELECT p.grant_id, p.request_id, p.scope, p.session_id, p.action_name,
                       p.constraints, p.created_at, p.expires_at, p.revoked_at,
                       (vals ->> (r -> 'audit_index' ->> 'v'))::bigint, p.mac
                FROM jsonb_array_elements(job -> 'aais_grants') AS r,
                     jsonb_populate_record(NULL::aais_grants, r - 'audit_index') AS p;
        END IF;
        UPDATE aais_meta SET
            last_sequence = m.last_sequence + n,
            audit_tip_index = CASE WHEN k > 0 THEN first_idx + k - 1 ELSE m.audit_tip_index END,
            audit_tip_hash = CASE WHEN k > 0 THEN prev ELSE m.audit_tip_hash END;
        RETURN vals;
    END $$""",
)
"""The server side, created by ``setup()`` (``CREATE OR REPLACE``: idempotent)."""

_INSERT = re.compile(r"INSERT INTO (\w+) \(([^)]*)\) VALUES \((.*)\)\Z", re.DOTALL)
_HOLE_COLUMNS = frozenset({"sequence", "audit_index"})
_TABLES = frozenset({"aais_events", "aais_requests", "aais_resolutions", "aais_grants"})
# Marks a hole while a template is rendered; a render that holds a mark more than
# once (the value carried it already) is rendered member by member instead.
_MARK = "\x00aais-hole-" + secrets.token_hex(16) + "-"
T = TypeVar("T")


@lru_cache(maxsize=64)
def _insert_shape(sql: str) -> tuple[str, tuple[str, ...], tuple[str | None, ...]]:
    """Table, columns, and per column ``None`` (a parameter) or a quoted literal's text."""
    match = _INSERT.match(sql)
    if match is None or match.group(1) not in _TABLES:  # pragma: no cover - ledger's own
        raise ValueError(f"not a row the stamp inserts: {sql[:40]}")
    table, columns, values = match.groups()
    items = [item.strip() for item in values.split(",")]
    literals = tuple(None if item == "?" else item.strip("'") for item in items)
    return table, tuple(c.strip() for c in columns.split(",")), literals


def _render(text: str, holes: Mapping[str, Any]) -> Template | None:
    """``text`` cut at the marks of ``holes`` (each exactly once), or ``None``."""
    parts: Template = []
    for name, hole in holes.items():
        mark = json.dumps(_MARK + name)
        if text.count(mark) != 1:
            return None
        before, text = text.split(mark)
        parts.append(before)
        parts.extend(hole if isinstance(hole, list) else [hole])
        # later holes are searched in what follows; order them as they appear
    parts.append(text)
    return [p for p in parts if p != ""]


def _marked(obj: Mapping[str, Any], holes: Mapping[str, Any]) -> dict[str, Any]:
    return {key: (_MARK + key if key in holes else value) for key, value in obj.items()}


def _ordered(text: str, holes: Mapping[str, Any]) -> dict[str, Any]:
    marks = {name: text.find(json.dumps(_MARK + name)) for name in holes}
    return {name: holes[name] for name in sorted(holes, key=lambda name: marks[name])}


def jcs_template(obj: Mapping[str, Any], holes: Mapping[str, Piece | Template]) -> Template:
    """RFC 8785 text of ``obj`` with the members named in ``holes`` left open."""
    text = canonical_json(_marked(obj, holes), pointer="/audit").decode("utf-8")
    rendered = _render(text, _ordered(text, holes))
    if rendered is not None:
        return rendered
    parts: list[Piece] = ["{"]  # a value carried the mark: one member at a time
    for n, key in enumerate(sorted(obj, key=lambda k: k.encode("utf-16be"))):
        parts.append(("," if n else "") + _jcs(key) + ":")
        hole = holes.get(key)
        parts.extend(hole if isinstance(hole, list) else [hole or _jcs(obj[key])])
    parts.append("}")
    return _literal(parts)


def dump_template(obj: Mapping[str, Any], holes: Mapping[str, Piece]) -> Template:
    """:func:`~._records.dump_json` text of ``obj`` with the members in ``holes`` left open."""
    text = dump_json(_marked(obj, holes))
    rendered = _render(text, _ordered(text, holes))
    if rendered is not None:
        return rendered
    parts: list[Piece] = ["{"]
    for n, (key, value) in enumerate(obj.items()):
        parts.append(("," if n else "") + dump_json(key) + ":")
        parts.append(holes.get(key) or dump_json(value))
    parts.append("}")
    return _literal(parts)


def _literal(parts: list[Piece]) -> Template:
    """Adjacent literal pieces merged."""
    merged: Template = []
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] = merged[-1] + part
        else:
            merged.append(part)
    return merged


def _jcs(value: Any) -> str:
    return canonical_json(value, pointer="/audit").decode("utf-8")


def fill(template: Template, values: Mapping[str, Any]) -> str:
    """A template's text with its holes filled as JSON (what ``aais_fill`` does)."""
    return "".join(p if isinstance(p, str) else json.dumps(values[p["v"]]) for p in template)


class StampedCounters(Counters):
    """:class:`Counters` whose values the server fills in when the write commits.

    ``allocate`` and ``append_audit`` hand out placeholders; rows go through
    :meth:`insert` and :meth:`insert_event`, kept as templates; on a clean exit one
    ``SELECT aais_stamp(...)`` is queued as the transaction's last statement, or
    ``call`` (a statement and its leading parameters, the job last) is sent: a write
    function of :mod:`._postgres_writes`, whose checks may refuse (:meth:`refused`). After
    the commit, :meth:`settled` swaps the placeholders of a returned value for the
    values stamped. A duplicate that the locked probe would have found is refused
    by the table's unique key instead (the caller turns it into the same answer).
    """

    canonical_rows = False  # the sequence is stamped at commit: rows keep the event's text

    def __init__(
        self,
        ledger: Any,
        cur: Cursor,
        probe: Probe | None = None,
        *,
        call: tuple[str, Sequence[Any]] | None = None,
    ) -> None:
        super().__init__(ledger, cur, None)
        self._call = call
        self._sequences = 0
        self._events: list[JsonDict] = []
        self._event_texts: dict[str, int] = {}
        self._audits: list[tuple[str, str, JsonDict]] = []
        self._rows: dict[str, list[dict[str, Any]]] = {table: [] for table in _TABLES}
        self._stamped: Any = None
        self._values: dict[str, Any] | None = None

    def __enter__(self) -> StampedCounters:
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if exc_type is not None or not (self._sequences or self._audits or self._call):
            return
        job: dict[str, Any] = {
            "n": self._sequences,
            "genesis": GENESIS_HASH,
            "digests": [jcs_template(event, self._sequence_hole(event)) for event in self._events],
            "audits": [self._audit(k, entry) for k, entry in enumerate(self._audits)],
            **self._rows,
        }
        sql, args = self._call or ("SELECT aais_stamp(%s::jsonb)", ())
        cursor = cast(Any, self._cur).connection.cursor(row_factory=tuple_row)
        cursor.execute(sql, (*args, dump_json(job)))
        self._stamped = cursor

    # -- what the shared code calls ---------------------------------------------------

    def allocate(self, count: int) -> int:
        first = SEQUENCE_BASE + self._sequences
        self._sequences += count
        self._changed = True
        return first

    def append_audit(self, kind: str, payload: Mapping[str, Any]) -> AuditEntry:
        if kind not in AUDIT_KINDS:
            raise ValueError(f"kind: not an audit kind (one of {sorted(AUDIT_KINDS)})")
        k = len(self._audits)
        occurred_at = format_timestamp(utc_now())
        sealed = sealed_payload(
            self._ledger.authority_key, kind, occurred_at, plain(payload, "/payload")
        )
        self._audits.append((kind, occurred_at, sealed))
        self._changed = True
        return AuditEntry(INDEX_BASE + k, kind, self._audits[k][1], self._audits[k][2], "", "")

    def insert(self, sql: str, params: Sequence[Any]) -> None:
        table, columns, literals = _insert_shape(sql)
        given = iter(params)
        row = {
            column: literal if literal is not None else self._value(column, next(given))
            for column, literal in zip(columns, literals, strict=True)
        }
        self._rows[table].append(row)

    def insert_event(self, envelope: JsonDict) -> str:
        text = dump_json(envelope)
        self._event_texts[text] = len(self._events)
        self._events.append(envelope)
        self.insert(INSERT_EVENT, (envelope["sequence"], text))
        return text

    def result(self, key: str) -> Any:
        """A member of what the statement sent returned (None when absent)."""
        return self._result().get(key)

    def refused(self) -> str | None:
        """Why the statement sent wrote nothing (a write function's ``refused``), or None."""
        refused = self._result().get("refused")
        return None if refused is None else str(refused)

    def settled(self, value: T) -> T:
        """``value`` with the placeholders it carries replaced by the stamped values."""
        values = self._result()
        if isinstance(value, StoredRequest | StoredResolution):
            envelope = {**value.envelope, "sequence": self._real("s", value.envelope["sequence"])}
            return cast(T, replace(value, envelope=envelope, audit_index=self._index(value)))
        if isinstance(value, AuditEntry):
            k = value.index - INDEX_BASE
            kind, occurred_at, payload = self._audits[k]
            return cast(
                T,
                AuditEntry(
                    values[f"i{k}"],
                    kind,
                    occurred_at,
                    json.loads(fill(dump_template(payload, self._payload_holes(payload)), values)),
                    values[f"p{k}"],
                    values[f"h{k}"],
                ),
            )
        return value

    # -- internals ----------------------------------------------------------------------

    def _result(self) -> dict[str, Any]:
        if self._values is None:
            row = self._stamped.fetchone() if self._stamped is not None else None
            self._values = {} if row is None else dict(row[0])
        return self._values

    def _real(self, kind: str, placeholder: Any) -> Any:
        base = SEQUENCE_BASE if kind == "s" else INDEX_BASE
        if isinstance(placeholder, int) and 0 <= placeholder - base < 2**50:
            return self._result()[f"{kind}{placeholder - base}"]
        return placeholder

    def _index(self, value: StoredRequest | StoredResolution) -> int | None:
        return cast("int | None", self._real("i", value.audit_index))

    def _hole(self, value: Any) -> dict[str, str] | None:
        if type(value) is int and 0 <= value - SEQUENCE_BASE < self._sequences:
            return {"v": f"s{value - SEQUENCE_BASE}"}
        if type(value) is int and 0 <= value - INDEX_BASE < len(self._audits):
            return {"v": f"i{value - INDEX_BASE}"}
        return None

    def _sequence_hole(self, obj: Mapping[str, Any]) -> dict[str, Piece]:
        hole = self._hole(obj.get("sequence"))
        return {} if hole is None or hole["v"][0] != "s" else {"sequence": hole}

    def _payload_holes(self, payload: Mapping[str, Any]) -> dict[str, Piece]:
        holes = self._sequence_hole(payload)
        if holes and "envelope_digest" in payload:
            sequence = payload["sequence"]
            event = next(e for e, env in enumerate(self._events) if env["sequence"] == sequence)
            holes["envelope_digest"] = {"v": f"d{event}"}
        return holes

    def _audit(self, k: int, entry: tuple[str, str, JsonDict]) -> dict[str, Any]:
        kind, occurred_at, payload = entry
        holes = self._payload_holes(payload)
        content = {"index": 0, "kind": kind, "occurred_at": occurred_at, "payload": payload}
        marked = {**content, "payload": _marked(payload, holes)}
        text = canonical_json(_marked(marked, {"index": 0}), pointer="/audit").decode("utf-8")
        template = _render(text, _ordered(text, {"index": {"v": f"i{k}"}, **holes}))
        if template is None:
            nested: dict[str, Piece | Template] = {
                "index": {"v": f"i{k}"},
                "payload": jcs_template(payload, holes),
            }
            template = jcs_template(content, nested)
        return {"c": template, "k": kind, "o": occurred_at, "x": dump_template(payload, holes)}

    def _value(self, column: str, value: Any) -> Any:
        if column in _HOLE_COLUMNS and (hole := self._hole(value)) is not None:
            return hole
        if column == "envelope" and isinstance(value, str) and value in self._event_texts:
            event = self._events[self._event_texts[value]]  # its event was inserted first
            return {"x": dump_template(event, self._sequence_hole(event))}
        return value
