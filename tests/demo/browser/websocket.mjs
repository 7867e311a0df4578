// Drives Debian chromium against `aais-agui demo` (started by tests/demo/test_browser_websocket.py):
// two tabs of the inbox follow the authority over the WebSocket profile and see the same state.
//
//   node websocket.mjs URL SCREENSHOT_DIR USER_DATA_DIR
//
// Talks to pytest over stdio: prints `STEP <name> [value]` lines and waits for
// `paused RID1 RID2` and `approved` on stdin. Exits non-zero on the first failed expectation.

import { mkdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [url, shots, userDataDir] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function step(name, value = "") {
  process.stdout.write(`STEP ${name} ${value}\n`);
}

async function nextLine() {
  const { value, done } = await lines.next();
  if (done) throw new Error("pytest closed stdin");
  return value.trim().split(" ");
}

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  viewport: { width: 1360, height: 900 },
});
context.setDefaultTimeout(20000);
const problems = [];
const decisionFrames = [];
const eventSources = [];

async function openTab(page) {
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    // (a favicon 404 is "Failed to load resource"; the inbox test ignores it too)
    if (message.type() === "error" && !/Failed to load resource/.test(message.text())) {
      problems.push(`console error: ${message.text()}`);
    }
  });
  page.on("request", (request) => {
    if (request.url().includes("/approvals/events")) eventSources.push(request.url());
  });
  page.on("websocket", (socket) => {
    socket.on("framesent", (frame) => {
      const sent = JSON.parse(frame.payload);
      if (sent.type === "approval.decided") decisionFrames.push(sent.decision.request_id);
    });
  });
  await page.goto(url);
  await page.waitForSelector("body[data-ready='true']");
  await page.waitForSelector("#connection[data-state='live'][data-transport='websocket']");
  return page;
}

const card = (page, requestId) => page.locator(`.card[data-request-id="${requestId}"]`);

try {
  const first = await openTab(context.pages()[0] ?? (await context.newPage()));
  const second = await openTab(await context.newPage());
  step("ready");

  // Two runs pause (started by pytest over AG-UI): both tabs show both cards, live.
  const [word, one, two] = await nextLine();
  if (word !== "paused") throw new Error(`expected 'paused', got '${word}'`);
  for (const page of [first, second]) {
    await card(page, one).waitFor();
    await card(page, two).waitFor();
  }
  await first.screenshot({ path: `${shots}/ws-two-cards.png`, fullPage: true });
  step("cards-live");

  // Decided elsewhere (the aais-langgraph CLI): both tabs drop the card.
  const [approved] = await nextLine();
  if (approved !== "approved") throw new Error(`expected 'approved', got '${approved}'`);
  for (const page of [first, second]) await card(page, one).waitFor({ state: "detached" });
  step("resolved-elsewhere");

  // Decided in the first tab: the decision goes over its WebSocket; the second tab follows.
  await card(first, two).getByRole("button", { name: "Approve once" }).click();
  await card(second, two).waitFor({ state: "detached" });
  await card(first, two).waitFor({ state: "detached" });
  if (!decisionFrames.includes(two)) throw new Error(`no decision frame for ${two}: ${decisionFrames}`);
  if (eventSources.length) throw new Error(`fell back to SSE: ${eventSources}`);
  if ((await first.locator(".card").count()) !== 0 || (await second.locator(".card").count()) !== 0) {
    throw new Error("a resolved request still shows as a card");
  }
  await second.screenshot({ path: `${shots}/ws-after.png`, fullPage: true });
  if (problems.length) throw new Error(problems.join("\n"));
  step("done");
} finally {
  await context.close();
}

process.exit(0); // stdin (pytest's pipe) stays open: do not wait for it
