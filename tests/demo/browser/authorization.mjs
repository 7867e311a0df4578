// Drives Debian chromium against `aais-agui serve ... --access-policy` (started by
// tests/demo/test_browser_authorization.py): one request raised by bob's run, seen by three
// people signed in with their own JWTs, each in a browser context of their own.
//
//   node authorization.mjs URL SCREENSHOT_DIR REQUEST_ID ALICE_JWT BOB_JWT DAVE_JWT
//
// alice (group sre) may decide it; bob (group dev) started the run, so he sees it but may not
// approve it; dave (group finance) is neither and does not see it. alice approves in the page
// and the card goes away for bob too.
//
// Prints one `STEP <name>` line per check and `STEP done` at the end; exits non-zero with a
// message on the first failed expectation.

import { mkdirSync } from "node:fs";
import { chromium } from "playwright-core";

const [url, shots, requestId, ...tokens] = process.argv.slice(2);
if (!url || !shots || !requestId || tokens.length !== 3) {
  process.stderr.write("usage: node authorization.mjs URL SCREENSHOT_DIR REQUEST_ID ALICE BOB DAVE\n");
  process.exit(2);
}
const [aliceToken, bobToken, daveToken] = tokens;
mkdirSync(shots, { recursive: true });
const TIMEOUT = 20000;

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

// One person: a browser context of their own (no shared cookies or storage), every request
// carrying their bearer token.
async function signIn(name, token) {
  const context = await browser.newContext({
    extraHTTPHeaders: { Authorization: `Bearer ${token}` },
    viewport: { width: 1360, height: 1000 },
  });
  context.setDefaultTimeout(TIMEOUT);
  const page = await context.newPage();
  page.on("pageerror", (error) => problems.push(`${name}: page error: ${error.message}`));
  page.on("request", (request) => {
    if (!request.url().startsWith(url) && !request.url().startsWith("data:")) {
      problems.push(`${name}: external request: ${request.url()}`);
    }
  });
  await page.goto(url);
  await page.waitForSelector("body[data-ready='true']");
  await page.waitForSelector("#connection[data-state='live']");
  const actor = (await page.locator("#actor").textContent()).trim();
  expect(actor.toLowerCase().includes(name), `${name}'s page says who decides: ${actor}`);
  return { name, context, page, card: page.locator(`.card[data-request-id="${requestId}"]`) };
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

// The value of a card's "origin" row (`<dt>term</dt><dd>value</dd>`), as text.
async function originRow(person, term) {
  const rows = person.card.locator(".origin > div");
  for (const row of await rows.all()) {
    if ((await row.locator("dt").textContent()).trim() === term) {
      return (await row.locator("dd").textContent()).trim();
    }
  }
  return null;
}

const people = [];
try {
  const alice = await signIn("alice", aliceToken);
  const bob = await signIn("bob", bobToken);
  const dave = await signIn("dave", daveToken);
  people.push(alice, bob, dave);
  step("signed-in", "alice bob dave");

  // alice may decide it: the card names its requester, and approve and deny are enabled.
  await explained(alice);
  const aliceRequester = await originRow(alice, "Requested by");
  expect(aliceRequester === "bob", `alice's card shows "Requested by bob", got ${aliceRequester}`);
  const aliceApprove = alice.card.locator(".choices button[data-decision='approve']");
  const aliceDeny = alice.card.locator(".choices button[data-decision='deny']");
  expect((await aliceApprove.count()) >= 1, "alice's card offers an approve button");
  expect((await aliceDeny.count()) >= 1, "alice's card offers a deny button");
  for (const button of [aliceApprove.first(), aliceDeny.first()]) {
    expect(await button.isEnabled(), `alice may press "${await button.textContent()}"`);
  }
  expect(!(await alice.card.locator(".not-allowed").isVisible()), "alice's card has no not-allowed note");
  step("alice-sees-card-enabled");
  await shot(alice, "01-alice-may-decide");

  // bob started the run: he sees his own request, but may not approve it, and is told why.
  await explained(bob);
  const bobRequester = await originRow(bob, "Requested by");
  expect(bobRequester === "bob", `bob's card shows "Requested by bob", got ${bobRequester}`);
  const bobApprove = bob.card.locator(".choices button[data-decision='approve']");
  expect((await bobApprove.count()) >= 1, "bob's card shows the approve button");
  for (const button of await bobApprove.all()) {
    expect(await button.isDisabled(), "bob's approve button is disabled");
    const title = (await button.getAttribute("title")) || "";
    expect(title.length > 0, "bob's disabled approve button says why in its title");
  }
  const note = bob.card.locator(".choices .not-allowed");
  await note.waitFor({ state: "visible" });
  const noteText = (await note.locator("p").allTextContents()).join(" / ");
  expect(/You may not approve this: /.test(noteText), `bob's card says he may not approve: ${noteText}`);
  expect(
    /separation of duties|only members of \S+ may decide/i.test(noteText),
    `the note names separation of duties or the deciding group: ${noteText}`,
  );
  step("bob-sees-own-card-approve-disabled", JSON.stringify(noteText));
  await shot(bob, "02-bob-may-not-approve");

  // dave is neither an approver nor the requester: no card, and the request does not exist
  // as far as his session can tell.
  await alice.card.waitFor(); // the request is still pending
  await dave.page.waitForTimeout(1000); // a late event would have added it by now
  expect((await dave.page.locator(".card").count()) === 0, "dave's inbox shows no card");
  expect(await dave.page.locator("#empty").isVisible(), "dave's inbox says it is empty");
  expect((await dave.page.locator("#pending-count").textContent()).trim() === "0", "dave's count is 0");
  const daveLookup = await dave.page.evaluate(async (id) => {
    const response = await fetch(`inbox/explanations/${encodeURIComponent(id)}`);
    return response.status;
  }, requestId);
  expect(daveLookup === 404, `dave's lookup of the request is a 404, got ${daveLookup}`);
  step("dave-sees-nothing");
  await shot(dave, "03-dave-sees-nothing");

  // alice approves in the page: her card records it, and bob's card goes away.
  await aliceApprove.first().click();
  await alice.card.locator(".card-status", { hasText: /Recorded: approved|Approved/ }).waitFor();
  step("alice-approved");
  await alice.card.waitFor({ state: "detached" });
  await bob.card.waitFor({ state: "detached" });
  expect((await bob.page.locator("#pending-count").textContent()).trim() === "0", "bob's count is 0");
  step("bob-card-gone");
  await shot(alice, "04-alice-after-approving");
  await shot(bob, "05-bob-after-alice-approved");
  expect((await dave.page.locator(".card").count()) === 0, "dave still sees no card");

  // After a reload, alice's recent decisions list the approval; dave's list nothing.
  for (const person of [alice, dave]) {
    await person.page.reload();
    await person.page.waitForSelector("body[data-ready='true']");
    await person.page.waitForSelector("body[data-standing-ready='true']");
  }
  const decided = alice.page.locator("#resolution-list > li");
  await decided.first().waitFor();
  const decidedText = await decided.first().textContent();
  expect(decidedText.includes("approved"), `alice's recent decisions show the approval: ${decidedText}`);
  expect((await dave.page.locator("#resolution-list > li").count()) === 0, "dave sees no recent decision");
  expect((await dave.page.locator(".card").count()) === 0, "dave sees no card after a reload");
  step("recent-decisions-filtered");
  await shot(dave, "06-dave-after-approval");

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
