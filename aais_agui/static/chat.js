// The conversation: AG-UI runs (POST with RunAgentInput, events read from the SSE stream with
// fetch + ReadableStream), and following a thread that another presenter resumed.

import { $, appendVisible, el, getJSON, headers, href, randomId, state } from "./common.js";

export function setChatStatus(text, kind = "") {
  const status = $("chat-status");
  status.textContent = text;
  status.dataset.kind = kind;
}

function setRunning(running) {
  state.running = running;
  $("send").disabled = running;
  $("prompt").disabled = running;
  document.body.dataset.running = String(running);
}

function toolName(toolCallId) {
  for (const message of state.messages) {
    for (const call of message.toolCalls || []) {
      if (call.id === toolCallId) return call.function?.name || "tool";
    }
  }
  return "tool";
}

function renderTranscript() {
  const list = $("transcript");
  const items = [];
  for (const message of state.messages) {
    if (message.role === "system" || message.role === "developer") continue;
    const item = el("li", `msg ${message.role}`);
    item.dataset.role = message.role;
    if (message.role === "tool") {
      const result = el("div", "tool-result");
      result.append(el("span", "tool-label", `Result of ${toolName(message.toolCallId)}`));
      result.append(appendVisible(el("pre"), message.content ?? "", { keepNewlines: true }));
      item.append(result);
    } else {
      const content = typeof message.content === "string" ? message.content : "";
      if (content) item.append(appendVisible(el("div", "bubble"), content, { keepNewlines: true }));
      for (const call of message.toolCalls || []) {
        const chip = el("div", "tool-call");
        chip.append(el("span", "tool-label", `Proposed call to ${call.function?.name ?? "a tool"}`));
        chip.append(el("code", "", call.function?.arguments ?? ""));
        item.append(chip);
      }
    }
    items.push(item);
  }
  if (state.interrupts.size) {
    const waiting = el("li", "msg notice");
    const count = state.interrupts.size;
    waiting.append(
      el("span", "", `Waiting for ${count} approval${count > 1 ? "s" : ""} in the inbox.`),
    );
    items.push(waiting);
  }
  if (!items.length) {
    items.push(el("li", "msg hint", "Say hello, or ask the agent to do something."));
  }
  list.replaceChildren(...items);
  list.scrollTop = list.scrollHeight;
  document.dispatchEvent(new Event("aais:transcript"));
}

function upsertMessage(id, role) {
  let message = state.messages.find((m) => m.id === id);
  if (!message) {
    message = { id, role, content: "" };
    state.messages.push(message);
  }
  return message;
}

function onAguiEvent(event) {
  switch (event.type) {
    case "TEXT_MESSAGE_START":
      upsertMessage(event.messageId, event.role || "assistant");
      break;
    case "TEXT_MESSAGE_CONTENT":
    case "TEXT_MESSAGE_CHUNK": {
      const message = upsertMessage(event.messageId, event.role || "assistant");
      message.content = (message.content || "") + (event.delta || "");
      break;
    }
    case "TOOL_CALL_START": {
      const parent = upsertMessage(event.parentMessageId || event.toolCallId, "assistant");
      parent.toolCalls = parent.toolCalls || [];
      parent.toolCalls.push({
        id: event.toolCallId,
        type: "function",
        function: { name: event.toolCallName, arguments: "" },
      });
      break;
    }
    case "TOOL_CALL_ARGS":
      for (const message of state.messages) {
        const call = (message.toolCalls || []).find((c) => c.id === event.toolCallId);
        if (call) call.function.arguments += event.delta || "";
      }
      break;
    case "TOOL_CALL_RESULT":
      state.messages.push({
        id: event.messageId,
        role: "tool",
        toolCallId: event.toolCallId,
        content: event.content,
      });
      break;
    case "MESSAGES_SNAPSHOT":
      state.messages = event.messages || [];
      break;
    case "RUN_FINISHED": {
      state.interrupts = new Map();
      const outcome = event.outcome;
      if (outcome && outcome.type === "interrupt") {
        for (const interrupt of outcome.interrupts || []) {
          const requestId = interrupt.metadata?.aais?.request?.id;
          if (requestId) state.interrupts.set(requestId, interrupt.id);
        }
      }
      setChatStatus("");
      break;
    }
    case "RUN_ERROR":
      setChatStatus(`The run stopped: ${event.message || "unknown error"}`, "error");
      break;
    default:
      return;
  }
  renderTranscript();
}

/** POST one AG-UI run and apply its events as they stream in. */
export async function runAgent(input) {
  setRunning(true);
  const body = {
    threadId: state.threadId,
    runId: randomId("run"),
    state: {},
    messages: [],
    tools: [],
    context: [],
    forwardedProps: {},
    ...input,
  };
  let failed = false;
  try {
    const response = await fetch(href(state.config.agent_path), {
      method: "POST",
      credentials: "same-origin",
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify(body),
    });
    if (!response.ok || !response.body) {
      const error = await response.json().catch(() => ({}));
      throw new Error(error?.error?.message || `HTTP ${response.status}`);
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const blocks = buffer.split(/\r?\n\r?\n/);
      buffer = blocks.pop();
      for (const block of blocks) {
        const data = block
          .split(/\r?\n/)
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        if (!data) continue;
        const event = JSON.parse(data);
        if (event.type === "RUN_ERROR") failed = true;
        onAguiEvent(event);
      }
    }
  } catch (error) {
    failed = true;
    setChatStatus(`Could not reach the agent: ${error.message}`, "error");
  } finally {
    setRunning(false);
  }
  return !failed;
}

export async function sendMessage(text) {
  if (state.interrupts.size) {
    setChatStatus("Answer the pending approval first; the run is paused on it.", "error");
    return;
  }
  state.messages.push({ id: randomId("msg"), role: "user", content: text });
  renderTranscript();
  setChatStatus("The agent is thinking…");
  await runAgent({ messages: state.messages });
}

/** Re-read the thread from the server until its run has settled (and `requestId` is gone). */
export async function followThread(requestId = null, timeoutMs = 90000) {
  const token = Symbol("follow");
  state.following = token;
  const deadline = Date.now() + timeoutMs;
  if (requestId) setChatStatus("Approval recorded; the run continues…");
  while (state.following === token) {
    try {
      const thread = await getJSON(`inbox/threads/${encodeURIComponent(state.threadId)}`);
      if (state.following !== token || thread.thread_id !== state.threadId) return;
      const waiting = thread.interrupts.some((i) => i.request_id === requestId);
      if (thread.settled && !waiting) {
        if (!state.running) {
          state.messages = thread.messages;
          state.interrupts = new Map(thread.interrupts.map((i) => [i.request_id, i.interrupt_id]));
          renderTranscript();
          setChatStatus("");
        }
        return;
      }
    } catch (error) {
      setChatStatus(`Could not read the conversation: ${error.message}`, "error");
    }
    if (Date.now() > deadline) {
      setChatStatus("The run is taking long; it will appear here when it settles.", "error");
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 400));
  }
}

export function useThread(threadId) {
  state.threadId = threadId;
  state.messages = [];
  state.interrupts = new Map();
  localStorage.setItem("aais-inbox-thread", threadId);
  $("thread-id").textContent = threadId;
  renderTranscript();
  return followThread();
}
