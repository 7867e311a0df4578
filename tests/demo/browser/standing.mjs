// Drives Debian chromium against `aais-agui demo` (started by tests/demo/test_browser_standing.py):
// approve `ls` for the session in a card, the next `ls` runs without asking, revoke the grant
// in the "Standing grants" list, and the next `ls` asks again (then deny it).
//
//   node standing.mjs URL SCREENSHOT_DIR USER_DATA_DIR
//
// Prints `STEP done` on success; exits non-zero with a message on the first failed expectation.

import { mkdirSync } from "node:fs";
import { chromium } from "playwright-core";

const [url, shots, userDataDir] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  viewport: { width: 1360, height: 1100 },
});
context.setDefaultTimeout(20000);
const page = context.pages()[0] ?? (await context.newPage());
const problems = [];
page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
page.on("dialog", (dialog) => dialog.accept()); // the revoke asks for confirmation

async function ask(text) {
  await page.fill("#prompt", text);
  await page.press("#prompt", "Enter");
}

async function settledWithoutApproval() {
  const threadId = (await page.locator("#thread-id").textContent()).trim();
  const deadline = Date.now() + 20000;
  while (Date.now() < deadline) {
    const view = await page.evaluate(async (id) => {
      const response = await fetch(`inbox/threads/${encodeURIComponent(id)}`);
      return response.json();
    }, threadId);
    const replied = view.messages.filter((m) => m.role === "tool").length;
    if (view.settled && view.interrupts.length === 0 && replied >= 2) return;
    await page.waitForTimeout(200);
  }
  throw new Error("the second `ls` did not run without asking");
}

try {
  await page.goto(url);
  await page.waitForSelector("body[data-ready='true']");
  await page.waitForSelector("body[data-standing-ready='true']");
  expect(await page.locator("#grants-empty").isVisible(), "no grants at first");

  // 1. Approve `ls` for this session in the card.
  await ask("run `ls -la`");
  const first = page.locator(".card").first();
  await first.getByRole("button", { name: /for this session/ }).click();
  await first.waitFor({ state: "detached" });
  const grant = page.locator("#grant-list > li");
  await grant.first().waitFor();
  expect((await grant.count()) === 1, "one standing grant listed");
  const text = await grant.first().textContent();
  expect(text.includes("'ls'"), `the grant's constraints are explained: ${text}`);
  expect(text.includes("session"), "the grant's scope is shown");
  const recent = page.locator("#resolution-list > li").first();
  await recent.waitFor();
  const recentText = await recent.textContent();
  expect(recentText.includes("approved") && recentText.includes("sha256:"), `recent decision: ${recentText}`);
  await page.locator("#audit-status", { hasText: "Audit chain verified" }).waitFor();
  const audit = await page.locator("#audit-status").textContent();
  expect(!/, 0 entries/.test(audit), `the first decision's entries are counted: ${audit}`);

  // 2. The next `ls` is covered by the grant: it runs without a card.
  await ask("run `ls -la` again");
  await settledWithoutApproval();
  expect((await page.locator(".card").count()) === 0, "no card while the grant stands");
  await page.screenshot({ path: `${shots}/standing-grant.png`, fullPage: true });

  // 3. Revoke it in the page: the list empties, and the next `ls` asks again.
  await grant.first().getByRole("button", { name: "Revoke" }).click();
  await page.locator("#grants-empty").waitFor({ state: "visible" });
  expect((await grant.count()) === 0, "the revoked grant is gone from the list");
  await ask("run `ls -la` once more");
  const asked = page.locator(".card").first();
  await asked.waitFor();
  await asked.getByRole("button", { name: "Deny" }).click();
  await asked.waitFor({ state: "detached" });
  await page.screenshot({ path: `${shots}/standing-revoked.png`, fullPage: true });
  if (problems.length) throw new Error(problems.join("\n"));
  process.stdout.write("STEP done\n");
} finally {
  await context.close();
}
