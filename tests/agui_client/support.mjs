// Shared helpers for the @ag-ui/client tests against the aais_agui demo server.
import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HttpAgent } from "@ag-ui/client";

export const BASE_URL = process.env.AAIS_AGUI_URL;
export const OUT_DIR = process.env.AAIS_AGUI_OUT;
if (!BASE_URL || !OUT_DIR) {
  throw new Error("set AAIS_AGUI_URL and AAIS_AGUI_OUT (tests/agui/test_node_client.py does)");
}
mkdirSync(join(OUT_DIR, "streams"), { recursive: true });

/** Write a JSON file for the Python side to check (aais.validate, side effects). */
export function record(name, value) {
  writeFileSync(join(OUT_DIR, `${name}.json`), JSON.stringify(value, null, 2));
}

/** fetch that also saves each raw SSE response body under OUT_DIR/streams. */
function recordingFetch(label) {
  let count = 0;
  return async (url, init) => {
    const response = await fetch(url, init);
    const copy = response.clone();
    const file = join(OUT_DIR, "streams", `${label}-${++count}.sse`);
    copy.text().then((text) => writeFileSync(file, text), () => {});
    return response;
  };
}

/** An HttpAgent on a thread; `label` names its recorded streams; `headers` (for example an
 * Authorization header) go with every request. */
export function agentFor(threadId, label, text, { headers } = {}) {
  const agent = new HttpAgent({
    url: `${BASE_URL}/agent`,
    threadId,
    ...(headers ? { headers } : {}),
    fetch: recordingFetch(label),
    initialMessages: text ? [{ id: `u_${randomUUID()}`, role: "user", content: text }] : [],
  });
  return agent;
}

/** Run the agent, capturing the terminal event and any RUN_ERROR instead of throwing. */
export async function run(agent, parameters = {}) {
  const seen = { finished: undefined, error: undefined, thrown: undefined };
  try {
    await agent.runAgent(parameters, {
      onRunFinishedEvent: (params) => {
        seen.finished = params;
      },
      onRunErrorEvent: ({ event }) => {
        seen.error = event;
      },
    });
  } catch (error) {
    seen.thrown = error;
  }
  return seen;
}

/** An approval.decided envelope answering an interrupt's AAIS request. */
export function decidedFor(interrupt, decision = "approve", scope = "once") {
  const request = interrupt.metadata.aais.request;
  const now = new Date().toISOString();
  return {
    aais: "1.0",
    type: "approval.decided",
    id: `evt_${randomUUID().replaceAll("-", "")}`,
    occurred_at: now,
    sequence: 0,
    decision: {
      id: `dec_${randomUUID().replaceAll("-", "")}`,
      request_id: request.id,
      action_digest: request.action_digest,
      decided_at: now,
      decision,
      scope,
      actor: { id: "node-client", type: "human" },
    },
  };
}

/** A resume entry carrying the decided envelope in metadata.aais. */
export function resumeWith(interrupt, decided = decidedFor(interrupt)) {
  return { interruptId: interrupt.id, status: "resolved", metadata: { aais: decided } };
}

export const newThread = () => `thread_${randomUUID()}`;
