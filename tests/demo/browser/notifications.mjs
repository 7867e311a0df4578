// Drives Debian chromium against `aais-agui serve ... --access-policy` with one `[[webhooks]]`
// subscription (started by tests/demo/test_browser_notifications.py): its notice of one
// request is dead. dave (group finance) may not see the request and sees no "Notifications"
// panel; alice (group sre) sees the dead delivery, without the receiver's URL, and retries it.
//
//   node notifications.mjs URL SCREENSHOT_DIR DELIVERY_ID REQUEST_ID RECEIVER_URL ALICE_JWT DAVE_JWT
//
// Prints one `STEP <name>` line per check and `STEP done` at the end; exits non-zero with a
// message on the first failed expectation.

import { mkdirSync } from "node:fs";
import { chromium } from "playwright-core";

const [url, shots, deliveryId, requestId, receiverUrl, aliceToken, daveToken] = process.argv.slice(2);
if (!daveToken) {
  process.stderr.write("usage: node notifications.mjs URL SCREENSHOT_DIR DELIVERY_ID REQUEST_ID RECEIVER_URL ALICE DAVE\n");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

function step(name) {
  process.stdout.write(`STEP ${name}\n`);
}

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const problems = [];

// One person: a browser context of their own, every request carrying their bearer token; the
// page has asked for the deliveries once.
async function signIn(name, token) {
  const context = await browser.newContext({
    extraHTTPHeaders: { Authorization: `Bearer ${token}` },
    viewport: { width: 1360, height: 1000 },
  });
  context.setDefaultTimeout(20000);
  const page = await context.newPage();
  page.on("pageerror", (error) => problems.push(`${name}: page error: ${error.message}`));
  await page.goto(url);
  await page.waitForSelector("body[data-ready='true']");
  await page.waitForSelector("body[data-notifications-ready='true']");
  return page;
}

try {
  const dave = await signIn("dave", daveToken);
  expect(await dave.locator("#notifications").isHidden(), "dave, who may not see the request, sees no panel");
  expect((await dave.locator("#delivery-list > li").count()) === 0, "dave is listed no delivery");
  step("hidden-for-dave");

  const alice = await signIn("alice", aliceToken);
  const panel = alice.locator("#notifications");
  const item = alice.locator(`#delivery-list > li[data-delivery-id="${deliveryId}"]`);
  await item.waitFor();
  expect(await panel.isVisible(), "alice sees the Notifications panel");
  expect((await alice.locator("#delivery-list > li").count()) === 1, "one delivery listed");
  const text = await item.textContent();
  for (const part of ["ops", "approval.requested", requestId, "Gave up", "1 failed attempt", "500"]) {
    expect(text.includes(part), `the dead delivery shows ${part}: ${text}`);
  }
  const port = new URL(receiverUrl).port;
  const shown = await panel.textContent();
  expect(!shown.includes(port) && !shown.includes("/hook"), `no receiver URL in the panel: ${shown}`);
  await alice.screenshot({ path: `${shots}/notifications-dead.png`, fullPage: true });
  step("dead-for-alice");

  await item.getByRole("button", { name: "Retry" }).click();
  await alice.locator(`#delivery-list > li[data-delivery-id="${deliveryId}"][data-state="pending"]`).waitFor();
  expect((await item.getByRole("button", { name: "Retry" }).count()) === 0, "no Retry once handed back");
  expect((await item.textContent()).includes("Handed back"), "the panel says it was handed back");
  await alice.screenshot({ path: `${shots}/notifications-retried.png`, fullPage: true });
  if (problems.length) throw new Error(problems.join("\n"));
  step("done");
} finally {
  await browser.close();
}
