// Drives Debian chromium against `aais-agui demo` whose ledger holds an approved action of
// unknown outcome (seeded by tests/demo/test_browser_unknown.py): the inbox lists it.
//
//   node unknown.mjs URL SCREENSHOT_DIR USER_DATA_DIR REQUEST_ID SUMMARY
//
// Prints `STEP done` on success; exits non-zero with a message on the first failed expectation.

import { mkdirSync } from "node:fs";
import { chromium } from "playwright-core";

const [url, shots, userDataDir, requestId, summary] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  viewport: { width: 1360, height: 900 },
});
context.setDefaultTimeout(20000);
const page = context.pages()[0] ?? (await context.newPage());
const problems = [];
page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));

try {
  await page.goto(url);
  await page.waitForSelector("body[data-ready='true']");
  const section = page.locator("#unknown");
  await section.waitFor({ state: "visible" });
  const listed = await page.locator("#unknown-list li").allTextContents();
  if (listed.length !== 1 || !listed[0].includes(requestId) || !listed[0].includes(summary)) {
    throw new Error(`unknown outcomes listed: ${JSON.stringify(listed)}`);
  }
  if (!(await section.textContent()).includes("reconcile ID --done")) {
    throw new Error("the reconcile command is not shown");
  }
  if ((await page.locator(".card").count()) !== 0) throw new Error("a resolved request shows as a card");
  await page.screenshot({ path: `${shots}/unknown-outcome.png`, fullPage: true });
  if (problems.length) throw new Error(problems.join("\n"));
  process.stdout.write("STEP done\n");
} finally {
  await context.close();
}
