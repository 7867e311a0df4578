// Drives Debian chromium against `aais-agui demo` (started and restarted by tests/demo/test_browser.py).
//
//   node inbox.mjs URL SCREENSHOT_DIR USER_DATA_DIR
//
// Talks to pytest over stdio: prints `STEP <name> [value]` lines and, where the server
// must change hands, waits for one line on stdin (`restarted`, `approved`).
// Exits non-zero with a message on the first failed expectation.

import { mkdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [url, shots, userDataDir] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const TIMEOUT = 20000;

function step(name, value = "") {
  process.stdout.write(`STEP ${name} ${value}\n`);
}

async function waitForLine(expected) {
  const { value, done } = await lines.next();
  if (done || value.trim() !== expected) throw new Error(`expected '${expected}' from pytest, got '${value}'`);
}

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

const context = await chromium.launchPersistentContext(userDataDir, {
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
  viewport: { width: 1360, height: 900 },
});
context.setDefaultTimeout(TIMEOUT);
const page = context.pages()[0] ?? (await context.newPage());
const problems = [];
page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
page.on("console", (message) => {
  if (message.type() === "error" && !/Failed to load resource|ERR_CONNECTION_REFUSED|EventSource/.test(message.text())) {
    problems.push(`console error: ${message.text()}`);
  }
});
// Nothing may be fetched from anywhere but the server under test.
page.on("request", (request) => {
  if (!request.url().startsWith(url) && !request.url().startsWith("data:")) {
    problems.push(`external request: ${request.url()}`);
  }
});

const card = (summary) =>
  page.locator(".card").filter({ has: page.locator(".summary", { hasText: summary }) });
const transcript = page.locator("#transcript");

async function ask(text) {
  await page.fill("#prompt", text);
  await page.press("#prompt", "Enter");
}

async function shot(name) {
  await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

try {
  await page.goto(url);
  await page.waitForSelector("body[data-ready='true']");
  await page.waitForSelector("#connection[data-state='live']");
  await shot("01-empty-inbox");

  // Ask for an action: the card shows digest, arguments, risk, scope explanation, expiry.
  await ask("Please run the tests");
  const tests = card("Run `pytest -q`");
  await tests.waitFor();
  const digest = await tests.locator(".digest").textContent();
  expect(/^sha256:[0-9a-f]{64}$/.test(digest), `digest shown: ${digest}`);
  const argumentsText = await tests.locator(".arguments").textContent();
  expect(argumentsText.includes("pytest -q") && !argumentsText.includes('"pytest -q"'), `arguments read as text: ${argumentsText}`);
  expect((await tests.locator(".origin dt", { hasText: /^Run$/ }).count()) === 0, "no internal run id on the card");
  expect((await tests.locator(".origin").textContent()).includes("aais-langgraph"), "harness shown");
  await tests.locator(".scope-lines li", { hasText: "starting with 'pytest'" }).waitFor();
  // The session choice names what it grants: the proposed program, as whole words.
  await tests.getByRole("button", { name: "Approve `pytest ...` for this session" }).waitFor();
  expect(/Expires in \d+:\d\d/.test(await tests.locator(".expiry").textContent()), "expiry countdown");
  await transcript.getByText("Waiting for 1 approval").waitFor();
  step("card", digest);
  await shot("02-card");

  // Approve with a click: the chat shows the result and the card goes away.
  await tests.getByRole("button", { name: "Approve once" }).click();
  await transcript.getByText("12 passed").first().waitFor();
  await tests.waitFor({ state: "detached" });
  await shot("03-approved");

  // Two actions in one message; the email uses a redacted credential reference.
  await ask("email alice@example.com, and write notes.md: ship the demo");
  const email = card("Send an email to alice@example.com");
  const write = card("Write notes.md");
  await email.waitFor();
  await write.waitFor();
  expect(await email.locator(".redacted").isVisible(), "redaction notice shown");
  expect((await email.locator(".redacted .hint").textContent()).includes("secret://smtp/password"), "binding hint");
  await email.locator(".flag", { hasText: "redacted reference" }).waitFor();
  const body = await email
    .locator(".arguments > div", { has: page.locator("dt", { hasText: /^body$/ }) })
    .locator("pre.value")
    .textContent();
  expect(body.startsWith("Hello,\n\nAs requested:") && !body.includes("\\n"), `the email body reads as text: ${body}`);
  await shot("04-two-approvals");
  await page.emulateMedia({ colorScheme: "dark" });
  await page.waitForTimeout(400); // let colour transitions finish
  await shot("04-two-approvals-dark");
  await page.setViewportSize({ width: 420, height: 900 });
  await page.waitForTimeout(200);
  await shot("04-two-approvals-narrow");
  await page.emulateMedia({ colorScheme: "light" });
  await page.setViewportSize({ width: 1360, height: 900 });
  // Two interrupts are open, so the card answers through the AAIS decisions endpoint.
  await email.getByRole("button", { name: "Approve once" }).click();
  await email.waitFor({ state: "detached" });
  await write.waitFor();
  step("pending-before-restart");
  await waitForLine("restarted");

  // The server restarted: the page reconnects, and the approval is still there after a reload.
  await page.waitForSelector("#connection[data-state='live']");
  await write.waitFor();
  await page.reload();
  await page.waitForSelector("body[data-ready='true']");
  await write.waitFor();
  await transcript.getByText("12 passed").first().waitFor();
  await shot("05-after-restart");
  await write.getByRole("button", { name: "Approve once" }).click();
  await transcript.getByText("wrote 13 bytes to notes.md").first().waitFor();
  await transcript.getByText("queued for alice@example.com").first().waitFor();
  await write.waitFor({ state: "detached" });
  await shot("06-after-restart-approved");

  // Invisible characters are shown, not obeyed; deny is a click too.
  await ask("write bidi.txt: invoice\u202Etxt.exe");
  const bidi = card("Write bidi.txt");
  await bidi.waitFor();
  expect((await bidi.locator(".arguments .ctl").textContent()) === "\\u202e", "bidi override visible");
  await shot("07-control-characters");
  await bidi.getByRole("button", { name: "Deny" }).click();
  await transcript.getByText("write_file was not run.").waitFor();
  await bidi.waitFor({ state: "detached" });

  // Answered elsewhere (the aais-langgraph CLI): the card disappears, the chat moves on.
  await ask("run `ls -la`");
  const listing = card("Run `ls -la`");
  await listing.waitFor();
  step("approve-elsewhere", await listing.getAttribute("data-request-id"));
  await waitForLine("approved");
  await listing.waitFor({ state: "detached" });
  await transcript.getByText("(simulated) actions.jsonl").waitFor();
  await transcript.getByText("Done: run_shell finished.").nth(1).waitFor();
  await shot("08-answered-elsewhere");

  expect(problems.length === 0, problems.join("\n"));
  step("done");
} catch (error) {
  await shot("failure").catch(() => {});
  process.stderr.write(`${error.stack || error}\n${problems.join("\n")}\n`);
  process.exitCode = 1;
} finally {
  await context.close();
  process.exit(process.exitCode ?? 0);
}
