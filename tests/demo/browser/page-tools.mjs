// Drives Debian chromium against a page with page tools (served by
// tests/demo/test_browser_page_tools.py): the gated `change_background` call reaches the
// page only after the approval, and an approval given after the page's tools changed
// releases nothing.
//
//   node page-tools.mjs URL SCREENSHOT_DIR USER_DATA_DIR
//
// Prints `STEP ...` lines and a final `RESULT {json}`; exits non-zero on the first failed
// expectation.

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
  viewport: { width: 1000, height: 700 },
});
context.setDefaultTimeout(20000);
const page = context.pages()[0] ?? (await context.newPage());
const problems = [];
page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
page.on("console", (message) => {
  if (message.type() === "error") problems.push(`console error: ${message.text()}`);
});

const background = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
const result = {};

try {
  await page.goto(`${url}/page`);
  await page.waitForSelector("body[data-ready='true']");
  result.threadId = await page.evaluate(() => window.pageTools.threadId);
  console.log("STEP ready");

  // 1. The model calls the gated page tool: the run pauses, the page sees no call.
  const asked = await page.evaluate(() => window.pageTools.ask("paint the page blue"));
  expect(asked.outcome === "interrupt", `paused on the approval: ${JSON.stringify(asked)}`);
  expect(asked.toolCalls.length === 0, "no tool call reached the page before the approval");
  expect((await page.evaluate(() => window.pageTools.toolCallsInMessages())) === 0, "no call in the page's messages");
  expect((await background()) === "rgb(255, 255, 255)", "the background is unchanged while pending");
  const [first] = await page.evaluate(() => window.pageTools.pending());
  result.approvedRequestId = first.metadata.aais.request.id;
  result.boundOrigin = first.metadata.aais.request.action.arguments.origin;
  console.log("STEP paused");

  // 2. Approve in the page: the call arrives, the page runs it, the model reads the result.
  const approved = await page.evaluate(() => window.pageTools.decide("approve"));
  expect(approved.outcome === "success", `released: ${JSON.stringify(approved)}`);
  expect(approved.toolCalls.length === 1 && approved.toolCalls[0].name === "change_background", "one released call");
  expect(JSON.stringify(approved.toolCalls[0].args) === '{"color":"blue"}', "the approved arguments");
  expect((await background()) === "rgb(0, 0, 255)", "the page ran the approved call");
  const done = await page.evaluate(() => window.pageTools.lastText());
  expect(done === "Done: background is blue", `the model read the result: ${done}`);
  await page.screenshot({ path: `${shots}/page-tools-approved.png`, fullPage: true });
  console.log("STEP approved");

  // 3. A new call; the page registers another tool before approving: stale, nothing runs.
  const again = await page.evaluate(() => window.pageTools.ask("paint the page yellow"));
  expect(again.outcome === "interrupt" && again.toolCalls.length === 0, "the second call waits");
  const [second] = await page.evaluate(() => window.pageTools.pending());
  result.staleRequestId = second.metadata.aais.request.id;
  await page.evaluate(() =>
    window.pageTools.registerTool({
      name: "read_cookies",
      description: "Read the page's cookies",
      inputSchema: { type: "object", properties: {} },
      execute: () => document.cookie,
    }),
  );
  const stale = await page.evaluate(() => window.pageTools.decide("approve"));
  expect(stale.toolCalls.length === 0, "no call is released after the tools changed");
  expect(stale.errors.length === 0, `no run error: ${stale.errors}`);
  expect((await background()) === "rgb(0, 0, 255)", "the background stays as it was");
  const told = await page.evaluate(() => window.pageTools.lastText());
  expect(/did not change the background/.test(told), `the model was told: ${told}`);
  await page.screenshot({ path: `${shots}/page-tools-stale.png`, fullPage: true });
  console.log("STEP stale");

  result.ran = await page.evaluate(() => window.pageTools.ran);
  expect(problems.length === 0, problems.join("\n"));
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await context.close();
}
