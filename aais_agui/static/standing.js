// What stands: live session/persistent grants with their constraints explained and a revoke
// button (SPEC §9), and recent resolutions with the audit chain's verify status.
// Untrusted text goes through el()/appendVisible only.

import { $, el, getJSON, headers, href } from "./common.js";

function who(actor) {
  if (!actor) return "the authority";
  return actor.display_name ? `${actor.display_name} (${actor.id})` : String(actor.id);
}

async function revoke(grant, button, status) {
  if (!window.confirm(`Revoke this ${grant.scope} grant for ${grant.action_name}? Matching actions will ask again.`)) return;
  button.disabled = true;
  status.textContent = "Revoking…";
  try {
    const response = await fetch(href(`inbox/grants/${encodeURIComponent(grant.grant_id)}/revoke`), {
      method: "POST",
      credentials: "same-origin",
      headers: headers({ "Content-Type": "application/json" }),
      body: "{}",
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body?.error?.message || `HTTP ${response.status}`);
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

function renderAudit(audit) {
  const node = $("audit-status");
  node.dataset.ok = String(audit.ok);
  node.replaceChildren();
  const tip = audit.tip ? ` (tip ${audit.tip.index})` : "";
  if (audit.ok) {
    node.append(el("span", "", `Audit chain verified${tip}, ${audit.checked} entries, at ${audit.checked_at}` +
      (audit.current ? "" : "; newer entries not verified yet")));
  } else {
    node.append(el("strong", "", "Audit chain verification FAILED"),
      el("span", "", `: ${audit.reason || "unknown reason"}` + (audit.table ? ` (${audit.table} ${audit.row_id})` : "")));
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

export function watchStanding() {
  document.addEventListener("aais:resolved", () => refreshStanding());
  setInterval(refreshStanding, 15000);
  return refreshStanding();
}
