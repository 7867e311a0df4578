"""Postgres: each common ledger write is one statement, a server-side function.

A write the client sent as ``BEGIN``, its checks, its rows, ``aais_stamp`` and
``COMMIT`` is sent as one ``SELECT aais_<write>(...)``: a single statement is its
own transaction (in autocommit), and the function makes the same checks in the
same order under the same locks, then stamps and writes (``aais_stamp``, see
:mod:`._postgres_server_counters`). What a check finds comes back as
``{"refused": why}`` with nothing written, and the client answers as the checks
in its own transaction did. An execution mark is made on what the client last
wrote (the record and the audit row vouching for it): refused when the server
finds anything else stored, and then made by the client's own transaction, which
reads and checks the stored record first. The checks and rows the writes share are
inner functions (``aais_resolving``, ``aais_resolved``, ``aais_execution_checked``,
``aais_store_execution``), so each check is written once. Writes that need not wait for the WAL
flush (leases, execution marks asked so) turn ``synchronous_commit`` off for their
own transaction inside the function (``set_config(..., true)``, which outlives the
call; a ``SET`` clause on the function would end with it, before the commit).

Created with the schema by ``setup()`` (``CREATE OR REPLACE``: idempotent).
"""

from __future__ import annotations

from ._rows import EXECUTION_COLUMNS, WORK_COLUMNS
from ._sql import UPSERT_EXECUTION

__all__ = ["EXECUTION_SUBJECT", "WRITE_FUNCTIONS"]

EXECUTION_SUBJECT = """(substring(payload from '^\\{"request_id":"([^"\\\\]+)"'))"""
"""The expression the schema's audit indexes of execution and follow-up entries index
(queries must spell it the same): the ``request_id`` an audit payload starts with, read
as text (a JSON cast would fail on a payload holding ``\\u0000``, which Postgres text
cannot)."""

_UPSERT_TAIL = UPSERT_EXECUTION[UPSERT_EXECUTION.index("ON CONFLICT") :]

_NOT_DURABLE = "PERFORM set_config('synchronous_commit', 'off', true);"

WRITE_FUNCTIONS = (
    # A new request: a replay finds its row, a compacted id its tombstone.
    """CREATE OR REPLACE FUNCTION aais_add_request(subject text, job jsonb) RETURNS jsonb
    LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM aais_requests WHERE request_id = subject) THEN
            RETURN '{"refused": "recorded"}';
        END IF;
        IF EXISTS (SELECT 1 FROM aais_compacted_requests WHERE request_id = subject) THEN
            RETURN '{"refused": "compacted"}';
        END IF;
        RETURN aais_stamp(job);
    END $$""",
    # The checks every resolution makes first: racing resolvers queue on the request's
    # row and later ones find the winner. ``refused`` is why nothing may be written
    # (NULL: go on), ``thread`` the request's thread.
    """CREATE OR REPLACE FUNCTION aais_resolving(subject text, OUT refused text, OUT thread text)
    LANGUAGE plpgsql AS $$
    BEGIN
        SELECT thread_id INTO thread FROM aais_requests WHERE request_id = subject FOR UPDATE;
        IF NOT FOUND THEN
            refused := 'missing';
        ELSIF EXISTS (SELECT 1 FROM aais_resolutions WHERE request_id = subject) THEN
            refused := 'recorded';
        END IF;
    END $$""",
    # What every resolution writes after its checks: "this thread must be resumed"
    # (``resume``, its thread filled in here) commits with it, and the request is resolved.
    f"""CREATE OR REPLACE FUNCTION aais_resolved(subject text, resume jsonb, thread text)
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        IF thread IS NOT NULL AND resume IS NOT NULL THEN
            INSERT INTO aais_outbox ({WORK_COLUMNS})
                SELECT {WORK_COLUMNS} FROM jsonb_populate_record(
                    NULL::aais_outbox, resume || jsonb_build_object('thread_id', thread))
                ON CONFLICT (kind, work_id) DO NOTHING;
        END IF;
        UPDATE aais_requests SET status = 'resolved' WHERE request_id = subject;
    END $$""",
    # The checks of an execution record's change, made on the record the client last
    # wrote for the request (``expected``, None: none) and vouched for by the entry it
    # then appended (``vouching``): false when either differs from what is stored (the
    # client then reads, checks and changes them in its own transaction instead).
    f"""CREATE OR REPLACE FUNCTION aais_execution_checked(
        subject text, lock_key bigint, expected jsonb, vouching jsonb
    ) RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
        stored aais_executions;
        entry aais_audit;
        present boolean;
    BEGIN
        -- A missing row cannot be locked FOR UPDATE: the request id is.
        PERFORM pg_advisory_xact_lock(lock_key);
        SELECT * INTO stored FROM aais_executions WHERE request_id = subject;
        present := FOUND;
        IF present IS DISTINCT FROM (expected IS NOT NULL) OR (present AND stored
                IS DISTINCT FROM jsonb_populate_record(NULL::aais_executions, expected)) THEN
            RETURN false;
        END IF;
        SELECT * INTO entry FROM aais_audit
            WHERE kind = 'execution' AND {EXECUTION_SUBJECT} = subject
            ORDER BY idx DESC LIMIT 1;
        present := FOUND;
        RETURN NOT (present IS DISTINCT FROM (vouching IS NOT NULL) OR (present AND entry
                IS DISTINCT FROM jsonb_populate_record(NULL::aais_audit, vouching)));
    END $$""",
    f"""CREATE OR REPLACE FUNCTION aais_store_execution(changed jsonb)
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO aais_executions ({EXECUTION_COLUMNS})
            SELECT {EXECUTION_COLUMNS}
            FROM jsonb_populate_record(NULL::aais_executions, changed)
            {_UPSERT_TAIL};
    END $$""",
    # A resolution.
    """CREATE OR REPLACE FUNCTION aais_resolve(subject text, resume jsonb, job jsonb)
    RETURNS jsonb LANGUAGE plpgsql AS $$
    DECLARE
        checked record;
    BEGIN
        SELECT * INTO checked FROM aais_resolving(subject);
        IF checked.refused IS NOT NULL THEN
            RETURN jsonb_build_object('refused', checked.refused);
        END IF;
        PERFORM aais_resolved(subject, resume, checked.thread);
        RETURN aais_stamp(job);
    END $$""",
    # A resolution that carries an execution claim (``changed``): ``aais_resolve``'s
    # checks, then ``aais_execute``'s, in the resolution's transaction. A refusal writes
    # nothing: "missing" and "recorded" as ``aais_resolve``, "changed" as ``aais_execute``.
    """CREATE OR REPLACE FUNCTION aais_resolve_claiming(
        subject text, resume jsonb, lock_key bigint, expected jsonb, vouching jsonb,
        changed jsonb, job jsonb
    ) RETURNS jsonb LANGUAGE plpgsql AS $$
    DECLARE
        checked record;
    BEGIN
        SELECT * INTO checked FROM aais_resolving(subject);
        IF checked.refused IS NOT NULL THEN
            RETURN jsonb_build_object('refused', checked.refused);
        END IF;
        IF NOT aais_execution_checked(subject, lock_key, expected, vouching) THEN
            RETURN '{"refused": "changed"}';
        END IF;
        PERFORM aais_store_execution(changed);
        PERFORM aais_resolved(subject, resume, checked.thread);
        RETURN aais_stamp(job);
    END $$""",
    # An execution record's change (see ``aais_execution_checked``).
    f"""CREATE OR REPLACE FUNCTION aais_execute(
        subject text, lock_key bigint, durable boolean, expected jsonb, vouching jsonb,
        changed jsonb, job jsonb
    ) RETURNS jsonb LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT durable THEN
            {_NOT_DURABLE}
        END IF;
        IF NOT aais_execution_checked(subject, lock_key, expected, vouching) THEN
            RETURN '{{"refused": "changed"}}';
        END IF;
        PERFORM aais_store_execution(changed);
        RETURN aais_stamp(job);
    END $$""",
    f"""CREATE OR REPLACE FUNCTION aais_acquire_lease(
        thread text, taker text, until double precision, moment double precision
    ) RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
        taken integer;
    BEGIN
        {_NOT_DURABLE}
        INSERT INTO aais_leases (thread_id, holder, expires_at) VALUES (thread, taker, until)
            ON CONFLICT (thread_id) DO UPDATE
            SET holder = excluded.holder, expires_at = excluded.expires_at
            WHERE aais_leases.holder = excluded.holder OR aais_leases.expires_at <= moment;
        GET DIAGNOSTICS taken = ROW_COUNT;
        RETURN taken = 1;
    END $$""",
    f"""CREATE OR REPLACE FUNCTION aais_renew_lease(
        thread text, taker text, until double precision, moment double precision
    ) RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN
        {_NOT_DURABLE}
        UPDATE aais_leases SET expires_at = until
            WHERE thread_id = thread AND holder = taker AND expires_at > moment;
        RETURN FOUND;
    END $$""",
    # Releasing marks the thread's resume work done (settled_change("done"): done stays
    # done, a claim is dropped) in the same transaction.
    f"""CREATE OR REPLACE FUNCTION aais_release_lease(
        thread text, taker text, done text[], moment double precision
    ) RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN
        {_NOT_DURABLE}
        IF cardinality(done) > 0 THEN
            UPDATE aais_outbox SET state = 'done', claimed_by = NULL, claim_until = 0,
                                   updated_at = moment
                WHERE kind = 'resume' AND work_id = ANY(done) AND state <> 'done';
        END IF;
        DELETE FROM aais_leases WHERE thread_id = thread AND holder = taker;
        RETURN FOUND;
    END $$""",
    # Releasing at the end of a run that also settles the execution record of the claim
    # it ran (``aais_execute``'s checks and change, not durable, as the mark would be):
    # refused ("changed") with nothing written, the lease kept, as ``aais_execute`` is.
    f"""CREATE OR REPLACE FUNCTION aais_release_executed(
        thread text, taker text, done text[], moment double precision, subject text,
        lock_key bigint, expected jsonb, vouching jsonb, changed jsonb, job jsonb
    ) RETURNS jsonb LANGUAGE plpgsql AS $$
    DECLARE
        released boolean;
    BEGIN
        {_NOT_DURABLE}
        IF NOT aais_execution_checked(subject, lock_key, expected, vouching) THEN
            RETURN '{{"refused": "changed"}}';
        END IF;
        PERFORM aais_store_execution(changed);
        released := aais_release_lease(thread, taker, done, moment);
        RETURN aais_stamp(job) || jsonb_build_object('released', released);
    END $$""",
)
"""The write functions, created by ``setup()`` after the tables."""
