// @ag-ui/client 1.0 against the aais_agui server: AAIS approvals as AG-UI interrupts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { agentFor, decidedFor, newThread, record, resumeWith, run } from "../support.mjs";

test("a gated node ends the run with an interrupt outcome carrying metadata.aais", async () => {
  const threadId = newThread();
  const agent = agentFor(threadId, "node-interrupt", "delete /srv/node-report.txt");
  const seen = await run(agent);
  assert.equal(seen.error, undefined);
  assert.equal(seen.finished.outcome, "interrupt");
  assert.equal(agent.pendingInterrupts.length, 1);
  const [interrupt] = agent.pendingInterrupts;
  assert.equal(interrupt.reason, "aais:approval");
  assert.equal(interrupt.message, "Delete a file from the shared drive");
  assert.equal(interrupt.metadata.aais.type, "approval.requested");
  assert.equal(interrupt.expiresAt, interrupt.metadata.aais.request.expires_at);
  assert.equal(interrupt.responseSchema.$defs.decided.properties.decision.properties.request_id.const,
    interrupt.metadata.aais.request.id);
  record("interrupt-node", { threadId, interrupt });
});

test("resuming with the decided envelope succeeds and the action runs once", async () => {
  const threadId = newThread();
  const agent = agentFor(threadId, "resume", "delete /srv/resumed.txt");
  await run(agent);
  const [interrupt] = agent.pendingInterrupts;
  const seen = await run(agent, { resume: [resumeWith(interrupt)] });
  assert.equal(seen.error, undefined, seen.error?.message);
  assert.equal(seen.finished.outcome, "success");
  assert.equal(agent.pendingInterrupts.length, 0);
  const deleted = agent.messages.filter((m) => m.role === "assistant" && m.content === "Deleted /srv/resumed.txt.");
  assert.equal(deleted.length, 1);
  record("resumed", { threadId, expect: [["delete_file", "/srv/resumed.txt"]] });
});

test("a second client on the same thread sees the same pending interrupt", async () => {
  const threadId = newThread();
  const first = agentFor(threadId, "first-client", "delete /srv/shared.txt");
  await run(first);
  const second = agentFor(threadId, "second-client");
  const seen = await run(second);
  assert.equal(seen.finished.outcome, "interrupt");
  assert.deepEqual(second.pendingInterrupts, first.pendingInterrupts);
  // The second client answers; the first client's view is now stale but nothing ran twice.
  const resumed = await run(second, { resume: [resumeWith(second.pendingInterrupts[0])] });
  assert.equal(resumed.finished.outcome, "success");
  record("second-client", { threadId, expect: [["delete_file", "/srv/shared.txt"]] });
});

test("two gated tool calls resumed in one resume[] are both applied", async () => {
  const threadId = newThread();
  const agent = agentFor(threadId, "tool-calls", "email ann@example.com,bob@example.com");
  await run(agent);
  assert.equal(agent.pendingInterrupts.length, 2);
  const interrupts = agent.pendingInterrupts;
  for (const interrupt of interrupts) {
    assert.equal(interrupt.reason, "tool_call");
    assert.match(interrupt.toolCallId, /^call_/);
  }
  const toolCallIds = new Set(interrupts.map((i) => i.toolCallId));
  assert.equal(toolCallIds.size, 2);
  record("interrupt-tools", { threadId, interrupts });
  const seen = await run(agent, { resume: interrupts.map((i) => resumeWith(i)) });
  assert.equal(seen.error, undefined, seen.error?.message);
  assert.equal(seen.finished.outcome, "success");
  const results = agent.messages.filter((m) => m.role === "tool");
  assert.deepEqual(new Set(results.map((m) => m.toolCallId)), toolCallIds);
  record("tool-calls", {
    threadId,
    expect: [["send_email", "ann@example.com"], ["send_email", "bob@example.com"]],
  });
});

test("a tampered digest ends in RUN_ERROR and nothing runs", async () => {
  const threadId = newThread();
  const agent = agentFor(threadId, "tampered", "delete /srv/tampered.txt");
  await run(agent);
  const [interrupt] = agent.pendingInterrupts;
  const decided = decidedFor(interrupt);
  decided.decision.action_digest = `sha256:${"0".repeat(64)}`;
  const seen = await run(agent, { resume: [resumeWith(interrupt, decided)] });
  assert.ok(seen.error, "expected RUN_ERROR");
  assert.equal(seen.error.code, "aais.digest_mismatch");
  // The refusal's stream offers the still-open interrupt again.
  assert.deepEqual(agent.pendingInterrupts.map((i) => i.id), [interrupt.id]);
  const again = agentFor(threadId, "tampered-reconnect");
  await run(again);
  assert.deepEqual(again.pendingInterrupts.map((i) => i.id), [interrupt.id]);
  record("tampered", { threadId, expect: [] });
});

test("cancelling every approval when nothing else runs ends with the cancelled outcome", async () => {
  const threadId = newThread();
  const agent = agentFor(threadId, "cancelled", "purge /srv/old.log");
  await run(agent);
  const [interrupt] = agent.pendingInterrupts;
  const seen = await run(agent, { resume: [{ interruptId: interrupt.id, status: "cancelled" }] });
  assert.equal(seen.error, undefined, seen.error?.message);
  assert.equal(seen.finished.outcome, "cancelled");
  assert.equal(agent.pendingInterrupts.length, 0);
  record("cancelled", { threadId, expect: [] });
});

test("an approval raised inside a subgraph carries subagentRunId and is answered by id", async () => {
  const threadId = newThread();
  const agent = agentFor(threadId, "subagent", "archive /srv/q3.csv");
  await run(agent);
  const [interrupt] = agent.pendingInterrupts;
  assert.match(interrupt.subagentRunId, /^archive:/);
  const reconnect = agentFor(threadId, "subagent-reconnect");
  await run(reconnect);
  assert.deepEqual(reconnect.pendingInterrupts, agent.pendingInterrupts);
  const seen = await run(agent, { resume: [resumeWith(interrupt)] });
  assert.equal(seen.error, undefined, seen.error?.message);
  assert.equal(seen.finished.outcome, "success");
  record("subagent", { threadId, expect: [["archive_file", "/srv/q3.csv"]] });
});
