// The AAIS approval inbox: a chat with the agent over AG-UI (when the graph takes messages),
// and pending approvals as cards.

import { connectEvents, tick } from "./cards.js";
import { sendMessage, setChatStatus, useThread } from "./chat.js";
import { $, approvalsPath, getJSON, randomId, state } from "./common.js";
import { offerSignIn, offerSignOut, signInStatus } from "./sign_in.js";
import { watchStanding } from "./standing.js";

async function start() {
  try {
    state.config = await getJSON("inbox/config");
  } catch (error) {
    const signIn = error.status === 401 ? await signInStatus() : null;
    if (signIn) {
      offerSignIn(signIn);
      setChatStatus("Sign in to see and answer the approvals waiting for you.");
      return;
    }
    $("connection").dataset.state = "down";
    $("connection").textContent = "Not signed in";
    $("empty").textContent = "Approvals cannot be shown: the server refused this page.";
    setChatStatus(`The server refused this page: ${error.message}`, "error");
    return;
  }
  $("title").textContent = state.config.title;
  const actor = state.config.actor;
  $("actor").textContent = `Deciding as ${actor.display_name || actor.id}`;
  if (String(actor.authenticated_by || "").startsWith("local-development")) {
    const warning = $("dev-warning");
    warning.hidden = false;
    warning.textContent =
      "Local development mode: every program on this machine can approve as you. Never expose this server beyond localhost.";
  }
  if (String(actor.authenticated_by || "").startsWith("oidc:")) {
    const signIn = await signInStatus();
    if (signIn?.signed_in) offerSignOut(signIn);
  }
  state.csrf = (await getJSON(approvalsPath("/csrf")).catch(() => ({}))).csrf_token || null;
  connectEvents();
  watchStanding();
  setInterval(() => state.cards.forEach(tick), 1000);
  if (state.config.chat === false) {
    // The served graph takes no chat messages: the page shows the approvals only.
    document.body.dataset.chat = "none";
    $("chat-panel").hidden = true;
    return;
  }
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("prompt").value.trim();
    if (!text || state.running) return;
    $("prompt").value = "";
    sendMessage(text);
  });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("new-thread").addEventListener("click", () => useThread(randomId("thread")));
  await useThread(localStorage.getItem("aais-inbox-thread") || randomId("thread"));
}

start();
