// Drives Debian chromium against `aais-agui serve note_graph:agent` with one pending
// approval (started by tests/demo/test_browser_note.py).
//
//   node note.mjs URL SCREENSHOT_DIR NOTE
//
// Types NOTE into the card's note field, denies, and checks the card shows the note the
// authority recorded. Prints `OK` or exits non-zero with the reason.

import { mkdirSync } from "node:fs";
import { chromium } from "playwright-core";

const [url, shots, note] = process.argv.slice(2);
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
  const card = page.locator(".card").first();
  await card.waitFor();
  const field = card.getByLabel("Note for the agent (optional, sent with a denial)");
  await field.fill(note);
  const deny = card.getByRole("button", { name: "Deny" });
  await page.waitForFunction(
    (selector) => !document.querySelector(selector)?.disabled,
    ".card .choices button.deny",
  );
  await deny.click();
  const status = card.locator(".card-status");
  await status.filter({ hasText: "denied" }).waitFor();
  const shown = await status.textContent();
  expect(shown.includes(`with your note: “${note}”`), `the card shows the note: ${shown}`);
  await page.screenshot({ path: `${shots}/note.png`, fullPage: true });
  expect(problems.length === 0, problems.join("\n"));
  process.stdout.write("OK\n");
} finally {
  await browser.close();
}
