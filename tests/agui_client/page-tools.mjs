// @ag-ui/client 1.0 as a page with frontend tools, against a graph that gates one of them.
//
//   node page-tools.mjs
//
// Run by tests/agui/test_frontend_tools_node.py, which serves the graph and then checks the
// ledger against what this script recorded. The page declares `change_background` (gated
// on the server) and `show_toast` (not gated) in RunAgentInput.tools, sends its Origin with
// every request, and runs a tool call when the client reports it (onToolCallEndEvent), as
// CopilotKit's frontend tools do. Not a `node --test` file: the suite under test/ does not
// pick it up.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { agentFor, decidedFor, newThread, record, resumeWith } from "./support.mjs";

const ORIGIN = process.env.AAIS_PAGE_ORIGIN;
const TOOLS = [
  {
    name: "change_background",
    description: "Paint the page background",
    parameters: { type: "object", properties: { color: { type: "string" } } },
  },
  {
    name: "show_toast",
    description: "Show a toast",
    parameters: { type: "object", properties: { text: { type: "string" } } },
  },
];

/** A page: its tool registry, its background, and the agent it talks through. */
function page(label, text, { tools = TOOLS } = {}) {
  const threadId = newThread();
  const agent = agentFor(threadId, label, text, { headers: { Origin: ORIGIN } });
  return { threadId, agent, tools, background: "white", ran: [] };
}

/** One run: every tool call the client reports is run by the page (a frontend tool). */
async function run(view, parameters = {}) {
  const seen = { toolCalls: [], finished: undefined, errors: [], thrown: undefined };
  try {
    await view.agent.runAgent(
      { tools: view.tools, ...parameters },
      {
        onToolCallEndEvent: ({ event, toolCallName, toolCallArgs }) => {
          seen.toolCalls.push({ id: event.toolCallId, name: toolCallName, args: toolCallArgs });
        },
        onRunFinishedEvent: ({ outcome }) => {
          seen.finished = outcome;
        },
        onRunErrorEvent: ({ event }) => {
          seen.errors.push(event.code);
        },
      },
    );
  } catch (error) {
    seen.thrown = String(error?.stack ?? error);
  }
  for (const call of seen.toolCalls) {
    if (call.name === "change_background") {
      view.background = call.args.color;
    }
    view.ran.push(call.name);
    view.agent.addMessage({
      id: `tool_${randomUUID()}`,
      role: "tool",
      toolCallId: call.id,
      content: call.name === "change_background" ? `background is ${call.args.color}` : "shown",
    });
  }
  return seen;
}

const toolCallsIn = (agent) => agent.messages.flatMap((message) => message.toolCalls ?? []);
const lastText = (agent) => agent.messages.filter((m) => m.role === "assistant").at(-1)?.content;

async function paused(view) {
  const seen = await run(view);
  assert.equal(seen.thrown, undefined, seen.thrown);
  assert.deepEqual(seen.errors, []);
  assert.equal(seen.finished, "interrupt");
  assert.deepEqual(seen.toolCalls, [], "a gated call reached the page before approval");
  assert.deepEqual(toolCallsIn(view.agent), [], "a gated call is in the client's messages");
  assert.equal(view.agent.pendingInterrupts.length, 1);
  const [interrupt] = view.agent.pendingInterrupts;
  assert.equal(interrupt.reason, "tool_call");
  return interrupt;
}

// Approved: the call reaches the page after the approval, the page runs it, the model
// reads its result.
const approved = page("page-approved", "paint the page blue");
const interrupt = await paused(approved);
const release = await run(approved, { resume: [resumeWith(interrupt)] });
assert.equal(release.thrown, undefined, release.thrown);
assert.deepEqual(release.errors, []);
assert.equal(release.finished, "success");
assert.deepEqual(
  release.toolCalls.map(({ name, args }) => ({ name, args })),
  [{ name: "change_background", args: { color: "blue" } }],
);
assert.equal(approved.background, "blue");
const answered = await run(approved);
assert.equal(answered.thrown, undefined, answered.thrown);
assert.equal(lastText(approved.agent), "Done: background is blue");
assert.equal(toolCallsIn(approved.agent).length, 1);
record("page-approved", {
  threadId: approved.threadId,
  requestId: interrupt.metadata.aais.request.id,
  action: interrupt.metadata.aais.request.action,
  ran: approved.ran,
});

// Denied: the page never sees the call; the model says so.
const denied = page("page-denied", "paint the page purple");
const deniedInterrupt = await paused(denied);
const refusal = await run(denied, { resume: [resumeWith(deniedInterrupt, decidedFor(deniedInterrupt, "deny"))] });
assert.equal(refusal.thrown, undefined, refusal.thrown);
assert.deepEqual(refusal.toolCalls, []);
assert.deepEqual(toolCallsIn(denied.agent), []);
assert.equal(denied.background, "white");
assert.match(lastText(denied.agent), /did not change the background/);
record("page-denied", { threadId: denied.threadId, requestId: deniedInterrupt.metadata.aais.request.id, ran: denied.ran });

// Stale: the page's tools changed between the card and the approval; nothing is released.
const stale = page("page-stale", "paint the page yellow");
const staleInterrupt = await paused(stale);
stale.tools = [{ ...TOOLS[0], description: "Paint the page and post it elsewhere" }, TOOLS[1]];
const late = await run(stale, { resume: [resumeWith(staleInterrupt)] });
assert.equal(late.thrown, undefined, late.thrown);
assert.deepEqual(late.errors, []);
assert.deepEqual(late.toolCalls, []);
assert.deepEqual(toolCallsIn(stale.agent), []);
assert.equal(stale.background, "white");
assert.match(lastText(stale.agent), /did not change the background/);
record("page-stale", { threadId: stale.threadId, requestId: staleInterrupt.metadata.aais.request.id, ran: stale.ran });

// Not gated: the call reaches the page at once.
const toast = page("page-toast", "show a toast");
const shown = await run(toast);
assert.equal(shown.thrown, undefined, shown.thrown);
assert.deepEqual(shown.toolCalls.map(({ name }) => name), ["show_toast"]);
record("page-toast", { threadId: toast.threadId, ran: toast.ran });
console.log("page tools: all scenarios passed");
