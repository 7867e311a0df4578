// aais-client.js — answer an AAIS approval from a browser or Node, with no dependencies.
//
// Turns an AG-UI interrupt (or an approval.requested envelope, or its request) and one of its
// offered choices into an approval.decided envelope and the AG-UI resume entry that carries it:
// fresh ids and RFC 3339 timestamps, the request id and action digest copied from the request,
// and a choice that was not offered refused before anything is sent. Served by aais_agui at
// /aais-client.js, so a page without npm can `import { resumeEntry } from "/aais-client.js"`.
//
//   import { resumeEntry, cancelEntry } from "/aais-client.js";
//   const entry = resumeEntry(interrupt, { decision: "approve", scope: "once" }, { actor });
//   agent.runAgent({ resume: [entry] });      // or CopilotKit: resolve(entry.payload, interrupt.id)
//
// The server records the actor its authentication names; `actor` is what the client believes.

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const PLACEMENTS = ["payload", "aais", "metadata"];

/** A refused input; `pointer` names the offending field (never its value). */
export class AAISClientError extends Error {
  constructor(pointer, reason) {
    super(`${pointer}: ${reason}`);
    this.name = "AAISClientError";
    this.pointer = pointer;
    this.reason = reason;
  }
}

function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The AAIS request behind `source`: an AG-UI interrupt (its metadata.aais), an
 * approval.requested envelope, or a request object (as in approval.snapshot's pending list).
 */
export function approvalRequest(source) {
  if (!isObject(source)) throw new AAISClientError("source", "expected an interrupt, an approval.requested envelope or a request");
  let request = source;
  let where = "request";
  if ("metadata" in source || ("reason" in source && "id" in source && !("action" in source))) {
    const envelope = source.metadata?.aais;
    if (!isObject(envelope) || envelope.type !== "approval.requested") {
      throw new AAISClientError("interrupt.metadata.aais", "not an AAIS approval (an approval.requested envelope is expected)");
    }
    request = envelope.request;
    where = "interrupt.metadata.aais.request";
  } else if ("type" in source || "aais" in source) {
    if (source.type !== "approval.requested") {
      throw new AAISClientError("envelope.type", 'must be "approval.requested"');
    }
    request = source.request;
    where = "envelope.request";
  }
  if (!isObject(request)) throw new AAISClientError(where, "must be an object");
  if (typeof request.id !== "string" || !request.id) throw new AAISClientError(`${where}.id`, "must be a non-empty string");
  if (typeof request.action_digest !== "string" || !DIGEST.test(request.action_digest)) {
    throw new AAISClientError(`${where}.action_digest`, "must be a sha256: digest");
  }
  if (!Array.isArray(request.choices) || request.choices.length === 0) {
    throw new AAISClientError(`${where}.choices`, "must offer at least one choice");
  }
  return request;
}

/**
 * The offered choice that `choice` names: an entry of request.choices, or `{decision, scope}`
 * (scope defaults to "once"), or a decision string for its "once" choice. Throws if not offered.
 */
export function offeredChoice(source, choice) {
  const request = approvalRequest(source);
  const wanted = typeof choice === "string" ? { decision: choice } : choice;
  if (!isObject(wanted) || typeof wanted.decision !== "string") {
    throw new AAISClientError("choice.decision", "must name a decision (approve, deny or cancel)");
  }
  const scope = wanted.scope ?? "once";
  if (typeof scope !== "string") throw new AAISClientError("choice.scope", "must be a string");
  const offered = request.choices.find((c) => c.decision === wanted.decision && c.scope === scope);
  if (!offered) {
    const listed = request.choices.map((c) => `${c.decision}/${c.scope}`).join(", ");
    throw new AAISClientError(
      "choice",
      `decision "${wanted.decision}" with scope "${scope}" was not offered by request ${request.id} (offered: ${listed})`,
    );
  }
  return offered;
}

function randomHex() {
  const cryptoApi = globalThis.crypto;
  if (cryptoApi?.randomUUID) return cryptoApi.randomUUID().replaceAll("-", "");
  if (!cryptoApi?.getRandomValues) throw new AAISClientError("crypto", "no Web Crypto API to make ids with");
  return Array.from(cryptoApi.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function checkActor(actor) {
  if (!isObject(actor)) throw new AAISClientError("options.actor", "is required: {id, type: \"human\"}");
  if (typeof actor.id !== "string" || !actor.id) throw new AAISClientError("options.actor.id", "must be a non-empty string");
  if (actor.type !== "human" && actor.type !== "policy") throw new AAISClientError("options.actor.type", 'must be "human" or "policy"');
  const copied = { id: actor.id, type: actor.type };
  for (const key of ["display_name", "authenticated_by"]) {
    if (actor[key] !== undefined) copied[key] = actor[key];
  }
  return copied;
}

/**
 * The approval.decided envelope answering `source` with `choice`.
 * options: actor (required), now (a Date; default: the current time), stream (an id).
 */
export function decide(source, choice, options = {}) {
  const request = approvalRequest(source);
  const offered = offeredChoice(request, choice);
  const actor = checkActor(options.actor);
  const now = options.now ?? new Date();
  if (!(now instanceof Date) || Number.isNaN(now.getTime())) throw new AAISClientError("options.now", "must be a valid Date");
  const moment = now.toISOString();
  const envelope = {
    aais: "1.0",
    type: "approval.decided",
    id: `evt_${randomHex()}`,
    occurred_at: moment,
    sequence: 0,
  };
  if (options.stream !== undefined) envelope.stream = options.stream;
  envelope.decision = {
    id: `dec_${randomHex()}`,
    request_id: request.id,
    action_digest: request.action_digest,
    decided_at: moment,
    decision: offered.decision,
    scope: offered.scope,
    actor,
  };
  return envelope;
}

/**
 * The AG-UI resume entry that carries a decided envelope for `interruptId`.
 * placement: "payload" (the envelope is the payload, as the interrupt's responseSchema
 * describes; the default), "aais" (payload {aais: envelope}) or "metadata" (metadata.aais).
 */
export function answerEntry(interruptId, decided, { placement = "payload" } = {}) {
  if (typeof interruptId !== "string" || !interruptId) throw new AAISClientError("interruptId", "must be a non-empty string");
  if (!isObject(decided) || decided.type !== "approval.decided") {
    throw new AAISClientError("decided.type", 'must be "approval.decided"');
  }
  if (!PLACEMENTS.includes(placement)) throw new AAISClientError("options.placement", `must be one of ${PLACEMENTS.join(", ")}`);
  const entry = { interruptId, status: "resolved" };
  if (placement === "payload") entry.payload = decided;
  else if (placement === "aais") entry.payload = { aais: decided };
  else entry.metadata = { aais: decided };
  return entry;
}

/** The resume entry answering an AG-UI `interrupt` with `choice` (see decide and answerEntry). */
export function resumeEntry(interrupt, choice, options = {}) {
  if (!isObject(interrupt) || typeof interrupt.id !== "string" || !interrupt.id) {
    throw new AAISClientError("interrupt.id", "must be a non-empty string");
  }
  return answerEntry(interrupt.id, decide(interrupt, choice, options), options);
}

/** The resume entry that cancels an interrupt (an AAIS cancel), with an optional reason. */
export function cancelEntry(interrupt, { reason } = {}) {
  const interruptId = typeof interrupt === "string" ? interrupt : interrupt?.id;
  if (typeof interruptId !== "string" || !interruptId) throw new AAISClientError("interrupt.id", "must be a non-empty string");
  const entry = { interruptId, status: "cancelled" };
  if (reason !== undefined) {
    if (typeof reason !== "string" || reason.length < 1 || reason.length > 2000) {
      throw new AAISClientError("options.reason", "must be 1 to 2000 characters");
    }
    entry.payload = { reason };
  }
  return entry;
}
