// @ag-ui/client 1.0 against aais_agui: a resume from a user who may see but not decide.
//
//   node forbidden-resume.mjs start|refuse|approve
//
// Run phase by phase by tests/agui/test_node_client_forbidden.py, which checks the
// ledger and the executed side effects between phases. Users authenticate with
// `Authorization: Bearer <name>-token`: alice (sre) may decide, bob (dev) may only view.
// Not a `node --test` file, so the suite under test/ does not pick it up.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { OUT_DIR, agentFor, newThread, record, resumeWith } from "./support.mjs";

const TARGET = "/srv/forbidden.txt";
const DELETED = `Deleted ${TARGET}.`;

/** An HttpAgent on a thread, authenticated as `user`. */
function agentAs(user, threadId, label, text) {
  return agentFor(threadId, label, text, { headers: { Authorization: `Bearer ${user}-token` } });
}

/** Run the agent, recording every event type, every RUN_ERROR and every RUN_FINISHED. */
async function runSeeing(agent, parameters = {}) {
  const seen = { types: [], errors: [], finished: [], thrown: undefined };
  try {
    await agent.runAgent(parameters, {
      onEvent: ({ event }) => {
        seen.types.push(event.type);
      },
      onRunErrorEvent: ({ event }) => {
        seen.errors.push({ code: event.code, message: event.message });
      },
      onRunFinishedEvent: ({ outcome, interrupts }) => {
        seen.finished.push({ outcome, interruptIds: (interrupts ?? []).map((i) => i.id) });
      },
    });
  } catch (error) {
    seen.thrown = String(error?.stack ?? error);
  }
  return seen;
}

const deletedMessages = (agent) =>
  agent.messages.filter((m) => m.role === "assistant" && m.content === DELETED);

const started = () => JSON.parse(readFileSync(join(OUT_DIR, "forbidden-start.json"), "utf8"));

async function start() {
  // alice asks for the deletion; the gate pauses the run on an approval interrupt.
  const threadId = newThread();
  const alice = agentAs("alice", threadId, "forbidden-alice-start", `delete ${TARGET}`);
  const seen = await runSeeing(alice);
  assert.equal(seen.thrown, undefined, seen.thrown);
  assert.deepEqual(seen.errors, []);
  assert.equal(seen.finished.at(-1).outcome, "interrupt");
  assert.equal(alice.pendingInterrupts.length, 1);
  const [interrupt] = alice.pendingInterrupts;
  assert.equal(interrupt.reason, "aais:approval");
  assert.equal(interrupt.metadata.aais.type, "approval.requested");
  record("forbidden-start", { threadId, interrupt });
}

async function refuse() {
  const { threadId, interrupt } = started();
  // bob (a viewer) reconnects and is offered the same card...
  const bob = agentAs("bob", threadId, "forbidden-bob");
  const reconnect = await runSeeing(bob);
  assert.equal(reconnect.thrown, undefined, reconnect.thrown);
  assert.deepEqual(reconnect.errors, []);
  assert.equal(reconnect.finished.at(-1).outcome, "interrupt");
  assert.deepEqual(bob.pendingInterrupts, [interrupt]);
  // ...but his approval is refused, and the same response offers the interrupt again.
  const seen = await runSeeing(bob, { resume: [resumeWith(interrupt)] });
  assert.equal(seen.thrown, undefined, seen.thrown);
  assert.equal(seen.errors.length, 1, JSON.stringify(seen.errors));
  assert.equal(seen.errors[0].code, "aais.forbidden", seen.errors[0].message);
  assert.deepEqual(seen.types.slice(0, 3), ["RUN_STARTED", "RUN_ERROR", "RUN_STARTED"]);
  assert.equal(seen.types.at(-1), "RUN_FINISHED");
  assert.deepEqual(seen.finished, [{ outcome: "interrupt", interruptIds: [interrupt.id] }]);
  assert.deepEqual(bob.pendingInterrupts, [interrupt]);
  assert.deepEqual(deletedMessages(bob), []);
  record("forbidden-refused", { threadId, seen, pending: bob.pendingInterrupts });
}

async function approve() {
  const { threadId, interrupt } = started();
  // alice, who may decide, reconnects, sees the same interrupt and answers it.
  const alice = agentAs("alice", threadId, "forbidden-alice-approve");
  const reconnect = await runSeeing(alice);
  assert.equal(reconnect.thrown, undefined, reconnect.thrown);
  assert.deepEqual(reconnect.errors, []);
  assert.deepEqual(alice.pendingInterrupts, [interrupt]);
  const seen = await runSeeing(alice, { resume: [resumeWith(interrupt)] });
  assert.equal(seen.thrown, undefined, seen.thrown);
  assert.deepEqual(seen.errors, [], JSON.stringify(seen.errors));
  assert.deepEqual(seen.finished, [{ outcome: "success", interruptIds: [] }]);
  assert.deepEqual(alice.pendingInterrupts, []);
  assert.equal(deletedMessages(alice).length, 1);
  record("forbidden-approved", { threadId, seen });
}

const phases = { start, refuse, approve };
const phase = phases[process.argv[2]];
if (!phase) {
  throw new Error(`usage: node forbidden-resume.mjs ${Object.keys(phases).join("|")}`);
}
await phase();
