// What stands: live session/persistent grants with their constraints explained and a revoke
// button (SPEC §9), recent resolutions with the audit chain's verify status, and webhook
// notifications that could not be delivered, with a retry.
// Untrusted text goes through el()/appendVisible only.

import { $, el, getJSON, postJSON } from "./common.js";

function who(actor) {
  if (!actor) return "the authority";
  return actor.display_name ? `${actor.display_name} (${actor.id})` : String(actor.id);
}

async function revoke(grant, button, status) {
  if (!window.confirm(`Revoke this ${grant.scope} grant for ${grant.action_name}? Matching actions will ask again.`)) return;
  button.disabled = true;
  status.textContent = "Revoking…";
  try {
    await postJSON(`inbox/grants/${encodeURIComponent(grant.grant_id)}/revoke`);
    status.textContent = "Revoked.";
    await refreshStanding();
  } catch (error) {
    status.textContent = `Not revoked: ${error.message}`;
    button.disabled = false;
  }
}

function grantItem(grant) {
  const item = el("li", "grant");
  item.dataset.grantId = grant.grant_id;
  const head = el("div", "grant-head");
  head.append(el("strong", "", grant.action_name), el("span", `scope scope-${grant.scope}`, grant.scope));
  const lines = el("ul", "explanation");
  for (const line of grant.explanation) lines.append(el("li", "", line));
  const meta = el("p", "grant-meta",
    `Session ${grant.session_id} · since ${grant.created_at}` +
    (grant.expires_at ? ` · until ${grant.expires_at}` : " · until revoked"));
  const status = el("span", "grant-status");
  status.setAttribute("role", "status");
  const button = el("button", "danger revoke", "Revoke");
  button.type = "button";
  button.addEventListener("click", () => revoke(grant, button, status));
  item.append(head, lines, meta, button, status);
  return item;
}

function resolutionItem(entry) {
  const item = el("li", `resolution outcome-${entry.outcome}`);
  item.dataset.requestId = entry.request_id;
  item.append(
    el("span", "outcome", entry.outcome + (entry.effective_scope ? ` (${entry.effective_scope})` : "")),
    el("span", "what", ` ${entry.summary || entry.action_name || entry.request_id}`),
  );
  item.append(el("p", "resolution-meta", `by ${who(entry.actor)} at ${entry.resolved_at}`));
  const digest = el("code", "digest", entry.action_digest);
  item.append(digest);
  return item;
}

let recheck = null; // one pending re-ask for newer audit entries

function renderAudit(audit) {
  const node = $("audit-status");
  node.dataset.ok = String(audit.ok);
  node.dataset.current = String(audit.current);
  node.replaceChildren();
  const tip = audit.tip ? ` (tip ${audit.tip.index})` : "";
  if (audit.ok) {
    const what = audit.checked === 0 ? "Audit chain empty" : `Audit chain verified${tip}, ${audit.checked} entries`;
    node.append(el("span", "", `${what}, at ${audit.checked_at}` +
      (audit.current ? "" : "; checking newer entries…")));
  } else {
    node.append(el("strong", "", "Audit chain verification FAILED"),
      el("span", "", `: ${audit.reason || "unknown reason"}` + (audit.table ? ` (${audit.table} ${audit.row_id})` : "")));
  }
  // The server checked before the latest entries: ask again once it will check them.
  if (!audit.current && recheck === null) {
    const delay = Math.max(0.5, Number(audit.next_check_in) || 0) * 1000;
    recheck = setTimeout(() => { recheck = null; refreshStanding(); }, delay);
  }
}

export async function refreshStanding() {
  try {
    const [grants, recent] = await Promise.all([getJSON("inbox/grants"), getJSON("inbox/resolutions")]);
    $("grant-list").replaceChildren(...grants.grants.map(grantItem));
    $("grants-empty").hidden = grants.grants.length > 0;
    $("resolution-list").replaceChildren(...recent.resolutions.map(resolutionItem));
    $("resolutions-empty").hidden = recent.resolutions.length > 0;
    renderAudit(recent.audit);
    document.body.dataset.standingReady = "true";
  } catch (error) {
    $("audit-status").textContent = `Could not load: ${error.message}`;
  }
}

// Webhook deliveries: dead ones with a retry, and those failing and retrying. The list names
// the subscription, the notice, the request id, the attempts and the error as recorded (a
// status code or an error type); the server never sends the receiver's URL.
const handedBack = new Set(); // ids retried from this page, forgotten once no longer listed

function deliveryState(delivery) {
  if (delivery.state === "dead") return ["dead", "Gave up"];
  if (handedBack.has(delivery.delivery_id) && delivery.attempts === 0) return ["handed-back", "Handed back"];
  return ["retrying", "Retrying"];
}

async function retry(delivery, button, status) {
  button.disabled = true;
  status.textContent = "Handing it back…";
  try {
    await postJSON(`inbox/webhooks/${encodeURIComponent(delivery.delivery_id)}/retry`);
    handedBack.add(delivery.delivery_id);
    await refreshNotifications();
  } catch (error) {
    status.textContent = `Not retried: ${error.message}`;
    button.disabled = false;
  }
}

function deliveryItem(delivery) {
  const [kind, label] = deliveryState(delivery);
  const item = el("li", `delivery delivery-${kind}`);
  item.dataset.deliveryId = delivery.delivery_id;
  item.dataset.state = delivery.state;
  const head = el("div", "delivery-head");
  head.append(el("strong", "", delivery.subscription), el("code", "notice", delivery.notice),
    el("span", `delivery-state state-${kind}`, label));
  const attempts = delivery.attempts === 1 ? "1 failed attempt" : `${delivery.attempts} failed attempts`;
  const when = {
    dead: attempts,
    retrying: `${attempts} · next try ${new Date(delivery.next_at * 1000).toLocaleTimeString()}`,
    "handed-back": "waiting for the sender",
  }[kind];
  const meta = el("p", "delivery-meta", `Request ${delivery.request_id} · ${when}`);
  item.append(head, meta);
  if (delivery.last_error) {
    const error = el("p", "delivery-error", "Last error: ");
    error.append(el("code", "", delivery.last_error));
    item.append(error);
  }
  if (delivery.state === "dead") {
    const status = el("span", "delivery-status");
    status.setAttribute("role", "status");
    const button = el("button", "retry", "Retry");
    button.type = "button";
    button.addEventListener("click", () => retry(delivery, button, status));
    item.append(button, status);
  }
  return item;
}

// Hidden when nothing failed, when this server has no such endpoint (404), and when this
// user may not see it (403).
export async function refreshNotifications() {
  const panel = $("notifications");
  try {
    const { deliveries } = await getJSON("inbox/webhooks");
    const listed = new Set(deliveries.map((delivery) => delivery.delivery_id));
    for (const id of handedBack) if (!listed.has(id)) handedBack.delete(id);
    const shown = deliveries.filter(
      (delivery) => delivery.state === "dead" || delivery.attempts > 0 || handedBack.has(delivery.delivery_id),
    );
    $("delivery-list").replaceChildren(...shown.map(deliveryItem));
    $("notifications-status").textContent = "";
    panel.hidden = shown.length === 0;
  } catch (error) {
    if (error.status === 403 || error.status === 404) panel.hidden = true;
    else $("notifications-status").textContent = `Could not refresh: ${error.message}`;
  }
  document.body.dataset.notificationsReady = "true";
}

export function watchStanding() {
  document.addEventListener("aais:resolved", () => refreshStanding());
  setInterval(refreshStanding, 15000);
  setInterval(refreshNotifications, 15000);
  refreshNotifications();
  return refreshStanding();
}
