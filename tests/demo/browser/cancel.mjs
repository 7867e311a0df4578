// Drives Debian chromium against `aais-agui serve no_chat_graph:builder` with one pending
// approval (started by tests/demo/test_browser_cancel.py).
//
//   node cancel.mjs URL SCREENSHOT_DIR [allowed|refused]
//
// Checks the page shows the approvals only (the graph takes no chat), then, when the policy
// lets the signed-in user cancel (`allowed`, the default), withdraws the request with the
// card's Cancel button; when it does not (`refused`), checks the card offers no Cancel button
// once its permissions are known. Prints `OK` or exits non-zero with the reason.

import { mkdirSync } from "node:fs";
import { chromium } from "playwright-core";

const [url, shots, mode = "allowed"] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const problems = [];
try {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  page.setDefaultTimeout(20000);
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  await page.goto(url);
  await page.waitForSelector("body[data-ready='true']");
  expect(!(await page.locator("#chat-panel").isVisible()), "the chat panel is hidden");
  expect(!(await page.locator("#prompt").isVisible()), "no prompt box");
  const card = page.locator(".card").first();
  await card.waitFor();
  const cancel = card.getByRole("button", { name: "Cancel request" });
  if (mode === "refused") {
    await card.locator(".choices .not-allowed:not([hidden])").waitFor(); // permissions known
    expect(!(await cancel.isVisible()), "no Cancel button for a user who may not cancel");
    await page.screenshot({ path: `${shots}/refused.png`, fullPage: true });
    expect(problems.length === 0, problems.join("\n"));
    process.stdout.write("OK\n");
    process.exit(0);
  }
  await cancel.waitFor({ state: "visible" });
  await page.waitForFunction(
    (selector) => !document.querySelector(selector)?.disabled,
    ".card .choices button.cancel-request",
  );
  await page.screenshot({ path: `${shots}/card.png`, fullPage: true });
  await cancel.click();
  const status = card.locator(".card-status");
  await status.filter({ hasText: "cancelled" }).waitFor();
  await page.screenshot({ path: `${shots}/cancel.png`, fullPage: true });
  expect(problems.length === 0, problems.join("\n"));
  process.stdout.write("OK\n");
} finally {
  await browser.close();
}
