// Drives LangGraph Server with the real @langchain/langgraph-sdk exactly as Agent Chat UI
// and Agent Inbox do, one step per call, and prints what it saw as one JSON line.
//
//   node ui_client.mjs '<JSON: {url, token, graph, step, thread_id?, ...}>'
//
// The interrupt checks and resume payloads are facts read from the UIs' sources,
// reimplemented here (never copied):
// - Agent Chat UI, isAgentInboxInterruptSchema:
//   https://github.com/langchain-ai/agent-chat-ui/blob/main/src/lib/agent-inbox-interrupt.ts
//   It resumes with thread.submit({}, {command: {resume: {decisions: [decision]}}}), and
//   "Mark as Resolved" submits {command: {goto: END}}
//   (src/components/thread/agent-inbox/hooks/use-interrupted-actions.tsx); useStream's
//   submit calls client.runs.stream(threadId, assistantId, {input: values, command, ...}).
// - Agent Inbox, normalizeInterrupt / getInterruptFromThread over client.threads.get(...)
//   .interrupts: https://github.com/langchain-ai/agent-inbox/blob/main/src/components/agent-inbox/contexts/utils.ts
//   It resumes with client.runs.stream(threadId, graphId, {command: {resume: [response]},
//   streamMode: "events"}) (src/components/agent-inbox/contexts/ThreadContext.tsx).
import { Client } from "@langchain/langgraph-sdk";

const END = "__end__"; // @langchain/langgraph's END

function isAgentInboxInterruptSchema(value) {
  const interrupt = Array.isArray(value) ? value[0] : value;
  if (!interrupt || typeof interrupt !== "object") return false;
  if (!interrupt.value || typeof interrupt.value !== "object") return false;
  const requests = interrupt.value.action_requests;
  const configs = interrupt.value.review_configs;
  if (!Array.isArray(requests) || requests.length === 0) return false;
  if (!Array.isArray(configs) || configs.length === 0) return false;
  const requestsOk = requests.every(
    (r) => r && typeof r === "object" && typeof r.name === "string" &&
      r.args !== null && typeof r.args === "object",
  );
  const configsOk = configs.every(
    (c) => c && typeof c === "object" && typeof c.action_name === "string" &&
      Array.isArray(c.allowed_decisions),
  );
  return requestsOk && configsOk;
}

function agentInboxCard(thread) {
  // Agent Inbox's reading of a HITL value (its normalizeInterrupt), the first interrupt.
  const lists = Object.values(thread.interrupts ?? {});
  const first = lists.length > 0 && Array.isArray(lists[0]) ? lists[0][0] : undefined;
  const data = first?.value;
  if (!data || !Array.isArray(data.action_requests) || data.action_requests.length === 0) {
    return null;
  }
  const request = data.action_requests[0];
  const decisions = data.review_configs?.[0]?.allowed_decisions ?? [];
  return {
    action_request: { action: request.name ?? "", args: request.arguments ?? {} },
    config: {
      allow_accept: decisions.includes("approve"),
      allow_edit: decisions.includes("edit"),
      allow_respond: decisions.includes("reject"),
      allow_ignore: false,
    },
    description: request.description,
  };
}

async function drain(stream) {
  const errors = [];
  let events = 0;
  for await (const chunk of stream) {
    events += 1;
    if (chunk.event === "error") errors.push(chunk.data);
  }
  return { events, errors };
}

async function main() {
  const args = JSON.parse(process.argv[2]);
  const headers = args.token ? { Authorization: `Bearer ${args.token}` } : {};
  const client = new Client({ apiUrl: args.url, defaultHeaders: headers });
  const out = { step: args.step };
  try {
    if (args.step === "start") {
      // Agent Chat UI: a new thread, a run with the human's message.
      const thread = await client.threads.create();
      out.thread_id = thread.thread_id;
      out.run = await drain(
        client.runs.stream(thread.thread_id, args.graph, {
          input: { messages: [{ type: "human", content: args.message }] },
          streamMode: ["values", "messages-tuple"],
        }),
      );
    } else if (args.step === "cards") {
      const state = await client.threads.getState(args.thread_id);
      const interrupt = (state.interrupts ?? [])[0];
      out.interrupt_ids = (state.interrupts ?? []).map((i) => i.id);
      out.agent_chat_ui_card = isAgentInboxInterruptSchema(interrupt);
      out.value = interrupt?.value ?? null;
      out.agent_inbox_card = agentInboxCard(await client.threads.get(args.thread_id));
    } else if (args.step === "chat-ui-resume") {
      out.run = await drain(
        client.runs.stream(args.thread_id, args.graph, {
          input: {},
          command: { resume: { decisions: [args.decision] } },
          streamMode: ["values", "messages-tuple"],
        }),
      );
    } else if (args.step === "chat-ui-mark-resolved") {
      out.run = await drain(
        client.runs.stream(args.thread_id, args.graph, {
          input: {},
          command: { goto: END },
          streamMode: ["values", "messages-tuple"],
        }),
      );
    } else if (args.step === "inbox-resume") {
      out.run = await drain(
        client.runs.stream(args.thread_id, args.graph, {
          command: { resume: [args.response] },
          streamMode: "events",
        }),
      );
    } else if (args.step === "change-call") {
      // Another client changes the waiting call's arguments (a state update).
      const state = await client.threads.getState(args.thread_id);
      const messages = state.values?.messages ?? [];
      const last = [...messages].reverse().find((m) => m.type === "ai" && m.tool_calls?.length);
      const call = { ...last.tool_calls[0], args: args.arguments };
      await client.threads.updateState(args.thread_id, {
        values: { messages: [{ ...last, tool_calls: [call] }] },
      });
      out.interrupt_ids = ((await client.threads.getState(args.thread_id)).interrupts ?? []).map(
        (i) => i.id,
      );
    } else if (args.step === "state") {
      const state = await client.threads.getState(args.thread_id);
      out.interrupt_ids = (state.interrupts ?? []).map((i) => i.id);
      out.messages = (state.values?.messages ?? []).map((m) => ({
        type: m.type,
        content: m.content,
        status: m.status,
        tool_call_id: m.tool_call_id,
      }));
    } else {
      throw new Error(`unknown step ${args.step}`);
    }
  } catch (error) {
    out.thrown = { name: error?.name, status: error?.status, message: String(error?.message) };
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

await main();
