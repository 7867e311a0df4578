// A generic @ag-ui/client 1.0 client, knowing nothing of AAIS, answers an approval bound:
// it reads only AG-UI 1.0 interrupt fields and the approval-bound action metadata of AG-UI's
// interrupts page (metadata.governance.actionFingerprint), never metadata.aais.
import assert from "node:assert/strict";
import { test } from "node:test";
import { agentFor, newThread, record, run } from "../support.mjs";

/** The schema branch a client following the interrupts page recognises: an object whose
 * required members are `approved` and `approvedActionFingerprint`. */
function boundBranch(schema) {
  const branches = schema.oneOf ?? [schema];
  return branches.find(
    (branch) => branch.type === "object" && branch.properties?.approved
      && (branch.required ?? []).includes("approvedActionFingerprint"),
  );
}

/** The resume entry a generic client builds from the interrupt's AG-UI fields alone. */
function boundAnswer(interrupt, approved, fingerprint = interrupt.metadata.governance.actionFingerprint) {
  return {
    interruptId: interrupt.id,
    status: "resolved",
    payload: { approved, approvedActionFingerprint: fingerprint },
  };
}

async function pausedOn(label, text) {
  const threadId = newThread();
  const agent = agentFor(threadId, label, text);
  const seen = await run(agent);
  assert.equal(seen.finished.outcome, "interrupt");
  const [interrupt] = agent.pendingInterrupts;
  return { threadId, agent, interrupt };
}

test("a generic client approves from responseSchema and the fingerprint; the action runs once", async () => {
  const { threadId, agent, interrupt } = await pausedOn("bound", "delete /srv/bound.txt");
  assert.ok(interrupt.message, "message is the universal fallback content");
  assert.ok(Date.parse(interrupt.expiresAt) > Date.now());
  const branch = boundBranch(interrupt.responseSchema);
  assert.ok(branch, "the responseSchema offers the bound answer");
  const fingerprint = interrupt.metadata.governance.actionFingerprint;
  assert.match(fingerprint, /^sha256:[0-9a-f]{64}$/);
  assert.equal(branch.properties.approvedActionFingerprint.const, fingerprint);
  const entry = boundAnswer(interrupt, true);
  const seen = await run(agent, { resume: [entry] });
  assert.equal(seen.error, undefined, seen.error?.message);
  assert.equal(seen.finished.outcome, "success");
  assert.equal(agent.pendingInterrupts.length, 0);
  record("bound", {
    threadId,
    interrupt,
    payload: entry.payload,
    expect: [["delete_file", "/srv/bound.txt"]],
  });
});

test("a generic client's denial is bound too and runs nothing", async () => {
  const { threadId, agent, interrupt } = await pausedOn("bound-denied", "delete /srv/bound-denied.txt");
  const seen = await run(agent, { resume: [boundAnswer(interrupt, false)] });
  assert.equal(seen.error, undefined, seen.error?.message);
  assert.equal(seen.finished.outcome, "success");
  assert.equal(agent.pendingInterrupts.length, 0);
  record("bound-denied", { threadId, expect: [] });
});

test("a drifted fingerprint is a RunError, nothing runs and the approval stays pending", async () => {
  const { threadId, agent, interrupt } = await pausedOn("bound-drifted", "delete /srv/bound-drifted.txt");
  const drifted = `sha256:${"0".repeat(64)}`;
  assert.notEqual(drifted, interrupt.metadata.governance.actionFingerprint);
  const seen = await run(agent, { resume: [boundAnswer(interrupt, true, drifted)] });
  assert.ok(seen.error, "expected RUN_ERROR");
  assert.equal(seen.error.code, "aais.digest_mismatch");
  const again = agentFor(threadId, "bound-drifted-reconnect");
  await run(again);
  assert.deepEqual(again.pendingInterrupts.map((i) => i.id), [interrupt.id]);
  record("bound-drifted", { threadId, expect: [] });
});
