// Pending approvals as cards: the AAIS snapshot and event stream in, decisions out (the AAIS
// decisions endpoint, or an AG-UI resume when the conversation's run waits on this card alone).

import { answerEntry, decide as decideApproval } from "./aais-client.js";
import {
  $,
  appendVisible,
  approvalsPath,
  el,
  getJSON,
  headers,
  href,
  json,
  postJSON,
  state,
} from "./common.js";
import { followThread, runAgent, setChatStatus } from "./chat.js";
import { sessionEnded } from "./sign_in.js";

function setCardStatus(card, text, kind = "") {
  const status = card.element.querySelector(".card-status");
  status.textContent = text;
  status.dataset.kind = kind;
}

function setCardBusy(card, busy) {
  card.busy = busy;
  for (const button of card.element.querySelectorAll(".choices button")) {
    const allowed = card.permissions?.[button.dataset.decision]?.allowed !== false;
    button.disabled = busy || card.expired || !card.explained || !allowed;
  }
}

// What the signed-in user may not press, and why: shown under the buttons (the server
// refuses those decisions anyway; this only says so before anyone tries).
function showPermissions(card, permissions) {
  card.permissions = permissions || {};
  const notes = card.element.querySelector(".choices .not-allowed");
  notes.replaceChildren();
  for (const button of card.element.querySelectorAll(".choices button")) {
    const permission = card.permissions[button.dataset.decision];
    if (permission && !permission.allowed) button.title = permission.reason;
  }
  const withdraw = card.element.querySelector(".choices button.cancel-request");
  if (withdraw) withdraw.hidden = card.permissions.cancel?.allowed !== true;
  const refused = ["approve", "deny"].filter((kind) => card.permissions[kind]?.allowed === false);
  for (const kind of refused) {
    notes.append(el("p", "", `You may not ${kind} this: ${card.permissions[kind].reason}`));
  }
  notes.hidden = refused.length === 0;
}

// The reviewer's note goes with a denial (the aais-langgraph.org/note extension; the
// authority checks its length and records it with the resolution).
const NOTE_EXTENSION = "aais-langgraph.org/note";

function noteFor(card, choice) {
  const field = card.element.querySelector(".note textarea");
  const note = field ? field.value.trim() : "";
  return choice.decision === "deny" && note ? note : null;
}

function recordedText(outcome, note) {
  return note ? `Recorded: ${outcome}, with your note: “${note}”.` : `Recorded: ${outcome}.`;
}

async function decide(card, choice) {
  const { request } = card;
  setCardBusy(card, true);
  setCardStatus(card, "Submitting your decision…");
  const envelope = decideApproval(request, choice, { actor: state.config.actor });
  const note = noteFor(card, choice);
  if (note) envelope.decision.extensions = { [NOTE_EXTENSION]: note };
  const interruptId = state.interrupts.get(request.id);
  if (interruptId && state.interrupts.size === 1 && !state.running) {
    // The chat's own run waits on this approval alone: answer it with an AG-UI resume.
    const resume = [answerEntry(interruptId, envelope, { placement: "metadata" })];
    setChatStatus("Resuming the run…");
    const ok = await runAgent({ resume });
    if (ok) {
      const said = choice.decision === "approve" ? "Approved." : "Denied.";
      setCardStatus(card, note ? `${said} Your note: “${note}”.` : said, "done");
    } else {
      setCardStatus(card, "The decision was not accepted; see the conversation.", "error");
      setCardBusy(card, false);
      followThread();
    }
    return;
  }
  if (socket) {
    // The WebSocket profile: the decision travels on the connection the events come in on.
    const reply = await sendOnSocket(envelope);
    const outcome = reply.resolution?.outcome;
    if (!RECORDED.has(outcome)) {
      setCardStatus(card, `Not recorded: ${reply.resolution?.message || reply.error?.message}`, "error");
      setCardBusy(card, false);
      return;
    }
    const recorded = reply.resolution.extensions?.[NOTE_EXTENSION];
    setCardStatus(card, `${recordedText(outcome, recorded)} The run continues.`, "done");
    if (state.interrupts.has(request.id)) followThread(request.id);
    return;
  }
  try {
    const response = await fetch(href(approvalsPath(`/${encodeURIComponent(request.id)}/decisions`)), {
      method: "POST",
      credentials: "same-origin",
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify(envelope),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      const message = body?.resolution?.message || body?.error?.message || `HTTP ${response.status}`;
      setCardStatus(card, `Not recorded: ${message}`, "error");
      setCardBusy(card, false);
      return;
    }
    const outcome = body.resolution.outcome;
    const recorded = body.resolution.extensions?.[NOTE_EXTENSION];
    setCardStatus(card, `${recordedText(outcome, recorded)} The run continues.`, "done");
    if (state.interrupts.has(request.id)) followThread(request.id);
  } catch (error) {
    setCardStatus(card, `Could not submit: ${error.message}`, "error");
    setCardBusy(card, false);
  }
}

// A requester (or anyone the policy lets cancel) withdraws the request: the cancel route
// records it as the signed-in user and the server resumes the run past it.
async function cancelRequest(card) {
  const { request } = card;
  setCardBusy(card, true);
  setCardStatus(card, "Cancelling the request…");
  try {
    const body = await postJSON(approvalsPath(`/${encodeURIComponent(request.id)}/cancel`), {});
    setCardStatus(card, `${recordedText(body.resolution.outcome, null)} The run continues.`, "done");
    if (state.interrupts.has(request.id)) followThread(request.id);
  } catch (error) {
    setCardStatus(card, `Not cancelled: ${error.message}`, "error");
    setCardBusy(card, false);
  }
}

function explanationFor(requestId) {
  if (!state.explanations.has(requestId)) {
    state.explanations.set(requestId, getJSON(`inbox/explanations/${encodeURIComponent(requestId)}`));
  }
  return state.explanations.get(requestId);
}

function addRow(list, term, value, className = "") {
  const row = el("div", className);
  row.append(el("dt", "", term));
  const description = el("dd");
  if (value instanceof Node) description.append(value);
  else appendVisible(description, value);
  row.append(description);
  list.append(row);
}

// A long value is never cut by a scroll box: its length, its start and its end are shown
// (the end is where `…; rm -rf ~` hides), with a button that shows all of it.
const HEAD_CHARS = 240;
const HEAD_LINES = 6;
const TAIL_CHARS = 400;
const TAIL_LINES = 10;

function valueBlock(className, text) {
  return appendVisible(el("pre", className), text, { keepNewlines: true });
}

const count = (n) => n.toLocaleString("en");

function argumentValue(text) {
  const chars = Array.from(text); // code points: never split a surrogate pair
  const lines = text.split("\n");
  if (chars.length <= HEAD_CHARS + TAIL_CHARS && lines.length <= HEAD_LINES + TAIL_LINES) {
    return valueBlock("value", text);
  }
  const headText = chars.slice(0, HEAD_CHARS).join("").split("\n").slice(0, HEAD_LINES).join("\n");
  const tailText = chars.slice(-TAIL_CHARS).join("").split("\n").slice(-TAIL_LINES).join("\n");
  const hidden = chars.length - Array.from(headText).length - Array.from(tailText).length;
  const box = el("div", "long-value");
  const label = el("p", "value-length");
  const lineCount = lines.length === 1 ? "1 line" : `${count(lines.length)} lines`;
  label.textContent = `Long value: ${count(chars.length)} characters, ${lineCount}. Its start and end are shown.`;
  const head = valueBlock("value head", headText);
  const elided = el("p", "elided");
  elided.textContent = `… ${count(hidden)} characters not shown …`;
  const tail = valueBlock("value tail", tailText);
  const toggle = el("button", "show-all");
  toggle.type = "button";
  let full = null;
  const show = (all) => {
    if (all && !full) full = valueBlock("value full", text);
    box.replaceChildren(label, ...(all ? [full] : [head, elided, tail]), toggle);
    toggle.setAttribute("aria-expanded", String(all));
    toggle.textContent = all ? "Show start and end only" : `Show all ${count(chars.length)} characters`;
  };
  toggle.addEventListener("click", () => show(toggle.getAttribute("aria-expanded") !== "true"));
  show(false);
  return box;
}

// A string reads as its text (line breaks as lines, invisible characters marked); other
// values, an empty string and one with blank ends (the quotes show them) read as JSON.
function shownValue(value) {
  return typeof value === "string" && value !== "" && value.trim() === value ? value : json(value);
}

function isReference(value, hint) {
  return typeof value === "string" && (/^secret:\/\//i.test(value) || (hint && hint.includes(value)));
}

function buildCard(request) {
  const element = $("card-template").content.firstElementChild.cloneNode(true);
  const card = { request, element, expired: false, explained: false, busy: false };
  element.dataset.requestId = request.id;
  element.dataset.session = request.origin.session_id;
  const { action, origin, risk } = request;

  appendVisible(element.querySelector(".summary"), action.summary);
  const badge = element.querySelector(".risk");
  badge.textContent = `${risk.level} risk`;
  badge.dataset.level = risk.level;

  const originList = element.querySelector(".origin");
  addRow(originList, "Harness", origin.harness);
  addRow(originList, "Session", origin.session_id, "id");
  const agent = [origin.agent_id, origin.graph_id, origin.node_id].filter(Boolean).join(" › ");
  addRow(originList, "Agent", agent || "—");
  const extensions = request.extensions || {};
  const requestedBy = extensions["aais-langgraph.org/requester"]?.id;
  if (requestedBy) addRow(originList, "Requested by", requestedBy);
  const quorum = extensions["aais-langgraph.org/quorum"];
  if (quorum) {
    const progress = `approval ${quorum.index} of ${quorum.of}`;
    const by = quorum.approved_by?.length ? `; approved so far by ${quorum.approved_by.join(", ")}` : "";
    addRow(originList, "Quorum", `${progress}${by} — each from a different person`, "quorum");
  }
  if (origin.project) addRow(originList, "Project", origin.project);

  const line = element.querySelector(".action-line");
  line.append(el("code", "kind", action.kind), el("span", "sep", "·"), el("code", "name", action.name));
  if (action.resource) line.append(el("span", "extra", `resource ${action.resource}`));
  if (action.working_directory) line.append(el("span", "extra", `in ${action.working_directory}`));

  const presentation = action.presentation || {};
  const hint = presentation.redacted ? presentation.binding_hint || "" : "";
  if (presentation.redacted) {
    const box = element.querySelector(".redacted");
    box.hidden = false;
    appendVisible(box.querySelector(".hint"), `Binding hint: ${hint}`);
  }
  const args = element.querySelector(".arguments");
  const names = Object.keys(action.arguments);
  if (!names.length) addRow(args, "(none)", "This action takes no arguments.");
  for (const name of names) {
    const value = action.arguments[name];
    const cell = document.createDocumentFragment();
    cell.append(argumentValue(shownValue(value)));
    if (presentation.redacted && isReference(value, hint)) {
      cell.append(el("span", "flag", "redacted reference — see binding hint"));
    }
    addRow(args, name, cell, presentation.redacted && isReference(value, hint) ? "ref" : "");
  }
  if (action.effects?.length) {
    const effects = el("ul", "effects");
    for (const effect of action.effects) effects.append(el("li", "", effect));
    addRow(args, "effects", effects);
  }

  const reasons = element.querySelector(".reasons");
  for (const reason of risk.reasons) reasons.append(el("li", "", reason));

  const choices = element.querySelector(".choices");
  const buttons = el("div", "buttons");
  choices.append(buttons);
  const notAllowed = el("div", "not-allowed");
  notAllowed.hidden = true;
  choices.append(notAllowed);
  for (const [index, choice] of request.choices.entries()) {
    const kind = choice.decision === "approve" ? (choice.scope === "once" ? "approve" : "approve-wide") : "deny";
    const button = el("button", kind, choice.label);
    button.type = "button";
    button.dataset.decision = choice.decision;
    button.dataset.scope = choice.scope;
    button.disabled = true;
    button.addEventListener("click", () => decide(card, choice));
    buttons.append(button);
    if (choice.scope !== "once") {
      const scope = el("div", "scope");
      scope.dataset.index = String(index);
      scope.append(el("p", "scope-title", `“${choice.label}” also approves later actions, without asking, when they match:`));
      scope.append(el("ul", "scope-lines"));
      choices.append(scope);
    }
  }
  if (!request.choices.some((choice) => choice.decision === "cancel")) {
    const withdraw = el("button", "cancel-request", "Cancel request");
    withdraw.type = "button";
    withdraw.dataset.decision = "cancel";
    withdraw.hidden = true; // shown once the explanation says the signed-in user may cancel
    withdraw.disabled = true;
    withdraw.title = "Withdraw this request: nothing runs, and the run continues past it";
    withdraw.addEventListener("click", () => cancelRequest(card));
    buttons.append(withdraw);
  }
  if (request.choices.some((choice) => choice.decision === "deny")) {
    const note = el("label", "note");
    note.append(el("span", "", "Note for the agent (optional, sent with a denial)"));
    const field = document.createElement("textarea");
    field.maxLength = 1000;
    field.rows = 2;
    note.append(field);
    choices.append(note);
  }
  explanationFor(request.id)
    .then((explained) => {
      for (const [index, choice] of explained.choices.entries()) {
        const scope = choices.querySelector(`.scope[data-index="${index}"] .scope-lines`);
        if (!scope) continue;
        const lines = choice.explanation.length ? choice.explanation : ["(no constraints stated)"];
        scope.replaceChildren(...lines.map((text) => el("li", "", text)));
      }
      showPermissions(card, explained.permissions);
      card.explained = true;
      setCardBusy(card, card.busy);
    })
    .catch((error) => setCardStatus(card, `Could not load the scope explanation: ${error.message}`, "error"));

  appendVisible(element.querySelector(".digest"), request.action_digest);
  element.querySelector(".request-id").textContent = `Request ${request.id}`;
  markThread(card);
  tick(card);
  return card;
}

function markThread(card) {
  const mine = state.interrupts.has(card.request.id) || card.request.origin.session_id === state.threadId;
  card.element.classList.toggle("this-thread", mine);
}

export function tick(card) {
  const expiry = card.element.querySelector(".expiry");
  if (!card.request.expires_at) {
    expiry.textContent = "No expiry";
    return;
  }
  const left = Date.parse(card.request.expires_at) - (Date.now() + state.clockOffset);
  if (left <= 0) {
    expiry.textContent = "Expired — it can no longer be approved";
    expiry.dataset.kind = "expired";
    if (!card.expired) {
      card.expired = true;
      setCardBusy(card, card.busy);
    }
    return;
  }
  const seconds = Math.floor(left / 1000);
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  const rest = String(seconds % 60).padStart(2, "0");
  expiry.textContent = `Expires in ${hours ? `${hours}:${String(minutes).padStart(2, "0")}` : minutes}:${rest}`;
  expiry.dataset.kind = seconds < 60 ? "soon" : "";
}

function renderCount() {
  const count = state.cards.size;
  $("pending-count").textContent = String(count);
  $("empty").hidden = count > 0;
  document.title = count ? `(${count}) ${state.config?.title || "AAIS approvals"}` : state.config?.title || "AAIS approvals";
}

function addCard(request) {
  if (state.cards.has(request.id)) return;
  const card = buildCard(request);
  state.cards.set(request.id, card);
  const cards = [...state.cards.values()].sort((a, b) =>
    a.request.created_at < b.request.created_at ? -1 : a.request.created_at > b.request.created_at ? 1 : 0,
  );
  $("cards").replaceChildren(...cards.map((c) => c.element));
  renderCount();
}

function removeCard(requestId, outcome) {
  const card = state.cards.get(requestId);
  if (!card) return;
  state.cards.delete(requestId);
  renderCount();
  if (!card.busy) setCardStatus(card, `Resolved elsewhere: ${outcome}.`, "done");
  card.element.classList.add("leaving");
  setTimeout(() => card.element.remove(), 450);
}

// Approved requests whose run died while executing them (the runtime's records, sent in the
// snapshot's extensions: resolved requests are never in `pending`).
const UNKNOWN_EXECUTIONS = "aais-langgraph.org/unknown_executions";

function renderUnknown(entries) {
  const items = entries.map((entry) => {
    const item = document.createElement("li");
    const id = document.createElement("code");
    id.textContent = String(entry.request_id);
    item.append(id, ` ${String(entry.summary)} (since ${String(entry.since)})`);
    return item;
  });
  $("unknown-list").replaceChildren(...items);
  $("unknown").hidden = items.length === 0;
}

// Answers recorded whose thread has not been resumed yet (durable resume work: any process
// serving the graph resumes them, retrying with backoff; the snapshot's extensions list them).
const RESUMING = "aais-langgraph.org/resuming";

function renderResuming(entries) {
  const items = entries.map((entry) => {
    const item = document.createElement("li");
    const id = document.createElement("code");
    id.textContent = String(entry.request_id);
    const since = new Date(Number(entry.since) * 1000).toLocaleTimeString();
    let text = ` ${String(entry.outcome)}, waiting to resume since ${since}`;
    if (Number(entry.attempts) > 0) text += `; ${Number(entry.attempts)} attempts`;
    if (entry.last_error) text += `; last error: ${String(entry.last_error)}`;
    if (entry.lease_holder) text += `; thread held by ${String(entry.lease_holder)}`;
    item.append(id, text);
    return item;
  });
  $("resuming-list").replaceChildren(...items);
  $("resuming").hidden = items.length === 0;
}

/** The card a link names (`#request=ID`, as email notices link it), shown once: scrolled to
 *  and marked; a request no longer pending (or not yours to see) is said so. The link only
 *  opens the card: deciding takes a click on the page, signed in. */
function showLinkedCard() {
  const match = /^#request=([^&]+)$/.exec(location.hash);
  if (!match || state.linkedShown) return;
  state.linkedShown = true;
  let requestId;
  try {
    requestId = decodeURIComponent(match[1]);
  } catch {
    return;
  }
  const card = state.cards.get(requestId);
  if (!card) {
    $("linked-status").hidden = false;
    return;
  }
  card.element.classList.add("linked");
  card.element.setAttribute("aria-current", "true");
  card.element.scrollIntoView({ block: "center" });
}

function onAaisEvent(envelope) {
  if (envelope.type === "approval.snapshot") {
    state.clockOffset = Date.parse(envelope.occurred_at) - Date.now();
    const pending = new Set(envelope.snapshot.pending.map((r) => r.id));
    for (const requestId of [...state.cards.keys()]) {
      if (!pending.has(requestId)) removeCard(requestId, "no longer pending");
    }
    for (const request of envelope.snapshot.pending) addCard(request);
    renderUnknown((envelope.extensions || {})[UNKNOWN_EXECUTIONS] || []);
    renderResuming((envelope.extensions || {})[RESUMING] || []);
    showLinkedCard();
    document.body.dataset.ready = "true";
  } else if (envelope.type === "approval.requested") {
    addCard(envelope.request);
  } else if (envelope.type === "approval.resolved") {
    const { request_id: requestId, outcome } = envelope.resolution;
    const ours = state.interrupts.has(requestId);
    removeCard(requestId, outcome);
    if (ours && !state.running) followThread(requestId);
    document.dispatchEvent(new CustomEvent("aais:resolved"));
  }
}

// The WebSocket profile when the server offers it, else SSE. Replies to this page's decisions
// carry the frame they answer (in the in_reply_to extension, or in an error's `frame`).
const IN_REPLY_TO = "aais-langgraph.org/in_reply_to";
const RECORDED = new Set(["approved", "denied", "cancelled", "expired"]);
let socket = null; // the open WebSocket, or null (decisions then go to the HTTP endpoint)
let socketWorked = false; // once a WebSocket opened, reconnects keep to WebSockets
let sentFrames = 0;
const awaitingReply = new Map(); // frame number -> resolve(reply)

function sendOnSocket(envelope) {
  sentFrames += 1;
  const frame = sentFrames;
  return new Promise((resolve) => {
    awaitingReply.set(frame, resolve);
    socket.send(JSON.stringify(envelope));
  });
}

function socketURL() {
  const url = new URL(href(approvalsPath("/ws")));
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  if (state.csrf) url.searchParams.set("csrf", state.csrf); // cookie sessions (a handshake has no headers)
  return url.toString();
}

export function connectEvents() {
  if (!("WebSocket" in window)) {
    connectServerSentEvents();
    return;
  }
  const connection = $("connection");
  const ws = new WebSocket(socketURL());
  let opened = false;
  ws.addEventListener("open", () => {
    opened = true;
    socketWorked = true;
    socket = ws;
    sentFrames = 0;
    connection.dataset.state = "live";
    connection.dataset.transport = "websocket";
    connection.textContent = "Live";
  });
  ws.addEventListener("message", (message) => {
    const document_ = JSON.parse(message.data);
    const frame = document_.error ? document_.error.frame : (document_.extensions || {})[IN_REPLY_TO]?.frame;
    if (frame !== undefined) {
      awaitingReply.get(frame)?.(document_);
      awaitingReply.delete(frame);
    } else if (!document_.gap) {
      onAaisEvent(document_); // a gap: the snapshot that follows replaces everything
    }
  });
  ws.addEventListener("close", () => {
    socket = null;
    for (const resolve of awaitingReply.values()) {
      resolve({ error: { message: "the connection closed; the card shows what was recorded" } });
    }
    awaitingReply.clear();
    if (!opened && !socketWorked) {
      connectServerSentEvents(); // no WebSocket here (a proxy, an older server): SSE
      return;
    }
    connection.dataset.state = "down";
    connection.textContent = "Reconnecting…";
    sessionEnded().then((ended) => {
      if (!ended) setTimeout(connectEvents, 1000); // a new connection starts from a fresh snapshot
    });
  });
}

function connectServerSentEvents() {
  const connection = $("connection");
  const source = new EventSource(href(approvalsPath("/events")), { withCredentials: true });
  source.addEventListener("open", () => {
    connection.dataset.state = "live";
    connection.dataset.transport = "sse";
    connection.textContent = "Live";
  });
  source.addEventListener("error", () => {
    connection.dataset.state = "down";
    connection.textContent = "Reconnecting…";
    sessionEnded().then((ended) => ended && source.close());
  });
  source.addEventListener("message", (message) => onAaisEvent(JSON.parse(message.data)));
  // A gap means older events were compacted: the snapshot that follows replaces everything.
  source.addEventListener("aais.gap", () => {});
}


document.addEventListener("aais:transcript", () => state.cards.forEach(markThread));
