// node --test for aais_agui/static/aais-client.js, driven by tests/agui/test_client_js.py.
// Reads the interrupt the Python side serves for the conformance request (AAIS_CLIENT_IN) and
// writes every resume entry it builds to AAIS_CLIENT_OUT, where Python parses and judges them.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { after, test } from "node:test";

import {
  AAISClientError,
  answerEntry,
  approvalRequest,
  cancelEntry,
  decide,
  offeredChoice,
  resumeEntry,
} from "../../../aais_agui/static/aais-client.js";

const { interrupt, requested } = JSON.parse(readFileSync(process.env.AAIS_CLIENT_IN, "utf8"));
const actor = { id: "node-client", type: "human", display_name: "Node" };
const built = [];
after(() => writeFileSync(process.env.AAIS_CLIENT_OUT, JSON.stringify(built, null, 1)));

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

test("every offered choice becomes a resume entry in every placement", () => {
  for (const choice of requested.request.choices) {
    for (const placement of ["payload", "aais", "metadata"]) {
      const entry = resumeEntry(interrupt, choice, { actor, placement });
      assert.equal(entry.interruptId, interrupt.id);
      assert.equal(entry.status, "resolved");
      built.push({ name: `${choice.decision}/${choice.scope}/${placement}`, entry });
    }
  }
});

test("the envelope copies the request id and digest and has fresh ids and RFC 3339 times", () => {
  const one = decide(interrupt, "approve", { actor });
  const two = decide(interrupt, "approve", { actor });
  assert.equal(one.decision.request_id, requested.request.id);
  assert.equal(one.decision.action_digest, requested.request.action_digest);
  assert.match(one.occurred_at, RFC3339);
  assert.equal(one.decision.decided_at, one.occurred_at);
  assert.notEqual(one.id, two.id);
  assert.notEqual(one.decision.id, two.decision.id);
  assert.match(one.id, /^evt_[0-9a-f]{32}$/);
  assert.deepEqual(one.decision.actor, actor);
});

test("an interrupt, its approval.requested envelope and its request give the same answer", () => {
  const now = new Date("2026-08-30T18:01:00Z");
  const strip = (envelope) => ({ ...envelope, id: "x", decision: { ...envelope.decision, id: "y" } });
  const fromInterrupt = strip(decide(interrupt, { decision: "deny" }, { actor, now }));
  assert.deepEqual(strip(decide(requested, { decision: "deny" }, { actor, now })), fromInterrupt);
  assert.deepEqual(strip(decide(requested.request, { decision: "deny" }, { actor, now })), fromInterrupt);
  assert.equal(approvalRequest(interrupt).id, requested.request.id);
  built.push({ name: "deny-from-request", entry: answerEntry(interrupt.id, decide(requested.request, "deny", { actor, now })) });
});

test("a choice that was not offered is refused, naming the field", () => {
  for (const [choice, pointer] of [
    [{ decision: "approve", scope: "persistent" }, "choice"],
    [{ decision: "cancel" }, "choice"],
    ["maybe", "choice"],
    [{ scope: "once" }, "choice.decision"],
    [{ decision: "approve", scope: 3 }, "choice.scope"],
  ]) {
    assert.throws(() => resumeEntry(interrupt, choice, { actor }), (error) => {
      assert.ok(error instanceof AAISClientError);
      assert.equal(error.pointer, pointer);
      assert.ok(error.message.startsWith(`${pointer}: `));
      return true;
    });
  }
  assert.throws(() => offeredChoice(interrupt, { decision: "approve", scope: "persistent" }), /was not offered by request apr_shell_001 \(offered: approve\/once, approve\/session, deny\/once\)/);
});

test("inputs that are not AAIS approvals are refused, naming the field", () => {
  const cases = [
    [() => resumeEntry({ id: "i1", reason: "langgraph:interrupt", metadata: {} }, "approve", { actor }), "interrupt.metadata.aais"],
    [() => decide({ ...requested, type: "approval.resolved" }, "approve", { actor }), "envelope.type"],
    [() => decide({ ...requested.request, action_digest: "sha256:XYZ" }, "approve", { actor }), "request.action_digest"],
    [() => decide(interrupt, "approve", {}), "options.actor"],
    [() => decide(interrupt, "approve", { actor: { id: "a", type: "robot" } }), "options.actor.type"],
    [() => resumeEntry({ ...interrupt, id: "" }, "approve", { actor }), "interrupt.id"],
    [() => resumeEntry(interrupt, "approve", { actor, placement: "header" }), "options.placement"],
    [() => cancelEntry(interrupt, { reason: "" }), "options.reason"],
  ];
  for (const [call, pointer] of cases) {
    assert.throws(call, (error) => error instanceof AAISClientError && error.pointer === pointer, pointer);
  }
});

test("cancel entries carry the interrupt id and an optional reason", () => {
  assert.deepEqual(cancelEntry(interrupt), { interruptId: interrupt.id, status: "cancelled" });
  const entry = cancelEntry(interrupt.id, { reason: "Not now" });
  assert.deepEqual(entry, { interruptId: interrupt.id, status: "cancelled", payload: { reason: "Not now" } });
  built.push({ name: "cancel", entry });
});

test("the served responseSchema's patterns mean in JavaScript what they mean in Python", () => {
  const patterns = [];
  (function walk(node) {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === "object") {
      if (typeof node.pattern === "string") patterns.push(node.pattern);
      Object.values(node).forEach(walk);
    }
  })(interrupt.responseSchema);
  assert.ok(patterns.length >= 3);
  const compiled = patterns.map((pattern) => new RegExp(pattern, "u")); // JSON Schema: ECMA-262
  const decided = interrupt.responseSchema.$defs.decided;
  const id = new RegExp(decided.properties.id.pattern, "u");
  assert.ok(id.test("evt_1.a:b-c") && !id.test("a\n") && !id.test("-a") && !id.test("a b"));
  const time = new RegExp(decided.properties.occurred_at.pattern, "u");
  for (const ok of ["2026-08-30T18:01:00Z", "2024-02-29t00:00:00.123456789+05:30", "2000-02-29T23:59:59-23:59"]) {
    assert.ok(time.test(ok), ok);
  }
  for (const bad of ["2026-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-01-01T24:00:00Z",
    "2026-01-01T00:00:60Z", "2026-01-01T00:00:00+05:60", "2026-01-01T00:00:00", "0000-01-01T00:00:00Z", "2026-01-01T00:00:00Z\n"]) {
    assert.ok(!time.test(bad), bad);
  }
  assert.equal(compiled.length, patterns.length);
});
