// Drives Debian chromium against tiny_graph's inbox behind OpenID Connect sign-in (started
// by tests/demo/test_browser_sign_in.py with a real OpenID provider on loopback): three
// people sign in at the provider's login form, each in a browser context of their own.
//
//   node sign_in.mjs URL SCREENSHOT_DIR REQUEST_ID
//
// bob's run raised the request. alice follows a `#request=ID` link (as an email notice
// gives) and signs in: the page opens on that card. alice (group sre) may approve it, bob sees it but may not,
// carol (finance) does not see it. alice approves, the card goes for bob. Then carol signs
// out in one tab: her other tab's stream ends and offers "Sign in", and her old session
// cookie opens neither the API nor the event stream (401).
//
// Prints one `STEP <name>` line per check and `STEP done` at the end; exits non-zero with a
// message on the first failed expectation.

import { mkdirSync } from "node:fs";
import { chromium } from "playwright-core";

const [url, shots, requestId] = process.argv.slice(2);
if (!url || !shots || !requestId) {
  process.stderr.write("usage: node sign_in.mjs URL SCREENSHOT_DIR REQUEST_ID\n");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const TIMEOUT = 20000;
const origin = new URL(url).origin;

function step(name, value = "") {
  process.stdout.write(`STEP ${name}${value ? ` ${value}` : ""}\n`);
}

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const problems = [];

function watch(name, page) {
  page.on("pageerror", (error) => problems.push(`${name}: page error: ${error.message}`));
}

// Signed out, the approvals list says so and offers "Sign in", never "Nothing is waiting".
async function signedOutList(page, name) {
  const empty = page.locator("#empty");
  await empty.waitFor({ state: "visible" });
  const said = (await empty.textContent()).trim();
  expect(said.startsWith("You are not signed in.") && !said.includes("Nothing is waiting"), `${name}'s list says they are not signed in: ${said}`);
  const inline = await empty.locator("a").getAttribute("href");
  expect(inline === (await page.locator("#sign-in").getAttribute("href")), `${name}'s list links to sign-in: ${inline}`);
}

// One person: a browser context of their own, signed in through the page's "Sign in" link
// and the provider's login form.
async function signIn(name) {
  const context = await browser.newContext({ viewport: { width: 1360, height: 1000 } });
  context.setDefaultTimeout(TIMEOUT);
  const page = await context.newPage();
  watch(name, page);
  // alice follows an emailed link to the card: it opens once she has signed in.
  const linked = name === "alice";
  await page.goto(linked ? `${url}#request=${encodeURIComponent(requestId)}` : url);
  const link = page.locator("#sign-in");
  await link.waitFor({ state: "visible" });
  expect((await page.locator("#connection").textContent()).trim() === "Not signed in", `${name}'s page says "Not signed in"`);
  await signedOutList(page, name);
  await link.click();
  await page.waitForURL((address) => address.origin !== origin);
  await page.locator("input[name=login]").fill(name);
  await page.locator("input[name=password]").fill(`${name}-password`);
  await page.locator("button[type=submit]").click();
  await page.waitForURL((address) => address.origin === origin);
  await page.waitForSelector("body[data-ready='true']");
  await page.waitForSelector("#connection[data-state='live']");
  const actor = (await page.locator("#actor").textContent()).trim();
  expect(actor.toLowerCase().includes(name), `${name}'s page says who decides: ${actor}`);
  expect(await page.locator("#sign-out").isVisible(), `${name}'s page offers "Sign out"`);
  expect(!(await page.locator("#sign-in").isVisible()), `${name}'s page no longer offers "Sign in"`);
  if (linked) {
    expect(new URL(page.url()).hash === `#request=${encodeURIComponent(requestId)}`, "the link's fragment survives the sign-in");
    await page.waitForSelector(`.card.linked[data-request-id="${requestId}"]`);
    step("linked-card", requestId);
  }
  const cookies = await context.cookies(url);
  const session = cookies.find((cookie) => cookie.name === "aais_session");
  expect(session && session.httpOnly && session.sameSite === "Lax", `${name}'s session cookie is HttpOnly, SameSite=Lax`);
  return { name, context, page, session, card: page.locator(`.card[data-request-id="${requestId}"]`) };
}

async function shot(person, name) {
  await person.page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

// The card's buttons wait for /inbox/explanations (the permissions) before they settle.
async function explained(person) {
  await person.card.waitFor();
  await person.page.waitForFunction(
    (id) => {
      const card = document.querySelector(`.card[data-request-id="${id}"]`);
      const approve = card?.querySelector(".choices button[data-decision='approve']");
      return approve && (!approve.disabled || approve.title);
    },
    requestId,
    { timeout: TIMEOUT },
  );
}

// What the server answers a request carrying only this session cookie.
async function statusWith(session, path) {
  const response = await fetch(new URL(path, url), {
    headers: { cookie: `aais_session=${session.value}` },
    redirect: "manual",
  });
  response.body?.cancel();
  return response.status;
}

const people = [];
try {
  const alice = await signIn("alice");
  const bob = await signIn("bob");
  const carol = await signIn("carol");
  people.push(alice, bob, carol);
  step("signed-in", "alice bob carol");
  await shot(alice, "01-alice-signed-in");

  await explained(alice);
  const aliceApprove = alice.card.locator(".choices button[data-decision='approve']").first();
  expect(await aliceApprove.isEnabled(), "alice may approve");
  step("alice-sees-card-enabled");

  await explained(bob);
  for (const button of await bob.card.locator(".choices button[data-decision='approve']").all()) {
    expect(await button.isDisabled(), "bob's approve button is disabled (his own request)");
  }
  step("bob-sees-own-card-approve-disabled");
  await shot(bob, "02-bob-may-not-approve");

  await carol.page.waitForTimeout(1000); // a late event would have added it by now
  expect((await carol.page.locator(".card").count()) === 0, "carol's inbox shows no card");
  expect((await carol.page.locator("#pending-count").textContent()).trim() === "0", "carol's count is 0");
  step("carol-sees-nothing");
  await shot(carol, "03-carol-sees-nothing");

  // alice approves: the decision goes with the session cookie and the CSRF header.
  await aliceApprove.click();
  await alice.card.locator(".card-status", { hasText: /Recorded: approved|Approved/ }).waitFor();
  await alice.card.waitFor({ state: "detached" });
  await bob.card.waitFor({ state: "detached" });
  step("alice-approved");
  await shot(alice, "04-alice-after-approving");

  // carol, in a second tab of the same browser, signs out in the first tab.
  const other = await carol.context.newPage();
  watch("carol (second tab)", other);
  await other.goto(url);
  await other.waitForSelector("#connection[data-state='live']");
  expect((await statusWith(carol.session, "inbox/config")) === 200, "carol's session opens the API");
  await carol.page.locator("#sign-out").click();
  await carol.page.locator("#sign-in").waitFor({ state: "visible" });
  expect((await carol.page.locator("#connection").textContent()).trim() === "Not signed in", "carol's page says Not signed in");
  await signedOutList(carol.page, "carol");
  step("carol-signed-out");
  await shot(carol, "05-carol-signed-out");
  // Her other tab's stream ends at its next re-authentication and offers "Sign in".
  await other.locator("#sign-in").waitFor({ state: "visible" });
  step("carol-other-tab-stream-ended");
  // The old cookie opens nothing: not the API, not the event stream.
  for (const path of ["inbox/config", "approvals/snapshot", "approvals/events"]) {
    const status = await statusWith(carol.session, path);
    expect(status === 401, `carol's old session on ${path}: ${status}`);
  }
  step("carol-old-session-401");
  // alice is still signed in.
  expect((await statusWith(alice.session, "inbox/config")) === 200, "alice's session still opens the API");

  expect(problems.length === 0, problems.join("\n"));
  step("done");
} catch (error) {
  for (const person of people) await shot(person, `failure-${person.name}`).catch(() => {});
  process.stderr.write(`${error.stack || error}\n${problems.join("\n")}\n`);
  process.exitCode = 1;
} finally {
  await browser.close();
  process.exit(process.exitCode ?? 0);
}
