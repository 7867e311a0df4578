// Browser sign-in, when the server offers it (OpenID Connect, aais_agui.http.sign_in): a
// "Sign in" link when the page is refused, and a "Sign out" button for a signed-in session.
// Nothing here is asked of a server without sign-in, except after it refused the page.

import { $, el, getJSON, href, postJSON, state } from "./common.js";

/** The server's sign-in routes (`GET login/status`), or null when it offers none. */
export async function signInStatus() {
  try {
    return await getJSON("login/status");
  } catch {
    return null;
  }
}

/** Show the "Sign in" link (back to this page afterwards) in place of the actor. */
export function offerSignIn(status) {
  const link = $("sign-in");
  const target = new URL(href(status.sign_in));
  // The fragment too: an emailed `#request=ID` link opens its card after signing in.
  target.searchParams.set("next", location.pathname + location.search + location.hash);
  link.href = target.toString();
  link.hidden = false;
  $("sign-out").hidden = true;
  $("actor").textContent = "";
  $("connection").dataset.state = "down";
  $("connection").textContent = "Not signed in";
  // The list is not empty, it is not shown: say so, where the cards would be.
  const again = el("a", "sign-in-inline", "Sign in");
  again.href = link.href;
  const empty = $("empty");
  empty.replaceChildren("You are not signed in. ", again, " to see the approvals waiting for you.");
  empty.dataset.signedOut = "true";
  empty.hidden = false;
}

/** For a session the sign-in opened: remember it and show "Sign out". */
export function offerSignOut(status) {
  state.signIn = status;
  const button = $("sign-out");
  button.hidden = false;
  button.addEventListener("click", async () => {
    button.disabled = true;
    await postJSON(status.sign_out).catch(() => {});
    location.assign(href("")); // the page again, signed out
  });
}

/** After a stream ended: whether this page's session ended (then "Sign in" shows). */
export async function sessionEnded() {
  if (!state.signIn) return false;
  const status = await signInStatus();
  if (!status || status.signed_in) return false;
  offerSignIn(status);
  return true;
}
