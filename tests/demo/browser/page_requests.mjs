// Opens the inbox page served by `aais-agui demo` in Debian chromium and reports every
// request that failed (a status of 400 or more, or no answer) and every console error.
//
//   node page_requests.mjs URL USER_DATA_DIR
//
// Prints one `FAILED <status> <path>` or `CONSOLE <text>` line per problem, then `DONE`.

import { chromium } from "playwright-core";

const [url, userDataDir] = process.argv.slice(2);
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
context.setDefaultTimeout(20000);
const page = context.pages()[0] ?? (await context.newPage());
page.on("console", (message) => {
  if (message.type() === "error") process.stdout.write(`CONSOLE ${message.text()}\n`);
});
page.on("response", (response) => {
  if (response.status() >= 400) {
    process.stdout.write(`FAILED ${response.status()} ${new URL(response.url()).pathname}\n`);
  }
});
page.on("requestfailed", (request) => {
  process.stdout.write(`FAILED none ${new URL(request.url()).pathname}\n`);
});
await page.goto(url);
await page.waitForSelector("body[data-ready='true']");
await page.waitForTimeout(1500); // the icon is fetched after the load
await context.close();
process.stdout.write("DONE\n");
