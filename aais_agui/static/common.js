// Shared by the inbox modules: page state, safe text rendering, and HTTP helpers.
// Untrusted text is only ever placed with textContent, never parsed as HTML, with control and
// invisible characters made visible. Nothing is loaded from any other site.

export const $ = (id) => document.getElementById(id);
const base = new URL(".", document.baseURI);
export const href = (path) => new URL(String(path).replace(/^\/+/, ""), base).toString();

export const state = {
  config: null,
  csrf: null,
  threadId: null,
  messages: [], // AG-UI messages of the current thread
  interrupts: new Map(), // request id -> AG-UI interrupt id, for the current thread
  cards: new Map(), // request id -> { request, element }
  explanations: new Map(), // request id -> Promise of the authority's explanations
  clockOffset: 0, // authority clock minus browser clock, in ms
  running: false,
  following: null,
  signIn: null, // the server's sign-in routes, for a session it opened
};

const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/u;

/** Append `text` to `parent`, showing control/format characters as highlighted \uXXXX. */
export function appendVisible(parent, text, { keepNewlines = false } = {}) {
  let plain = "";
  const flush = () => {
    if (plain) parent.append(document.createTextNode(plain));
    plain = "";
  };
  for (const ch of String(text)) {
    if ((keepNewlines && ch === "\n") || !INVISIBLE.test(ch)) {
      plain += ch;
      continue;
    }
    flush();
    const mark = document.createElement("span");
    mark.className = "ctl";
    mark.title = "invisible or control character";
    mark.textContent = "\\u" + ch.codePointAt(0).toString(16).padStart(4, "0");
    parent.append(mark);
  }
  flush();
  return parent;
}

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) appendVisible(node, text);
  return node;
}

export function json(value) {
  return JSON.stringify(value, null, 2) ?? "null";
}

export function randomId(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return prefix + "_" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function headers(extra = {}) {
  const sent = { Accept: "application/json", ...extra };
  if (state.csrf) sent["X-AAIS-CSRF"] = state.csrf;
  return sent;
}

// A refused request throws an Error with the server's message and the HTTP `status`.
async function answered(response) {
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw Object.assign(new Error(body?.error?.message || `HTTP ${response.status}`), { status: response.status });
  }
  return body;
}

export async function getJSON(path) {
  return answered(await fetch(href(path), { headers: headers(), credentials: "same-origin" }));
}

/** POST `payload` as JSON, with the CSRF header (a state change). */
export async function postJSON(path, payload = {}) {
  return answered(await fetch(href(path), {
    method: "POST",
    credentials: "same-origin",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(payload),
  }));
}

export function approvalsPath(suffix) {
  return state.config.approvals_prefix.replace(/\/+$/, "") + suffix;
}
