// Playwright (playwright-core + Debian chromium, headless) drives both CopilotKit pages against a
// running aais_agui server; started by tests/copilotkit/test_copilotkit.py, which then checks the
// server's effect log and ledger against what this test wrote to AAIS_EXAMPLE_OUT.
//
//   AAIS_RUNTIME_URL=http://127.0.0.1:3000/ AAIS_DIRECT_URL=http://127.0.0.1:8000/copilotkit/ \
//   AAIS_TOKEN=... AAIS_EXAMPLE_OUT=out.json node --test test/
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";

const TOKEN = process.env.AAIS_TOKEN;
const PAGES = { runtime: process.env.AAIS_RUNTIME_URL, direct: process.env.AAIS_DIRECT_URL };
const TIMEOUT = 30000;
const expected = {};
let browser;

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  });
});

after(async () => {
  await browser?.close();
  writeFileSync(process.env.AAIS_EXAMPLE_OUT, JSON.stringify(expected, null, 2));
});

async function open(mode) {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  context.setDefaultTimeout(TIMEOUT);
  const problems = [];
  const external = new Set();
  // Only loopback: CopilotKit may try to reach its cloud; nothing leaves the machine.
  await context.route("**/*", (route) => {
    const { hostname, protocol } = new URL(route.request().url());
    if (protocol === "data:" || hostname === "127.0.0.1" || hostname === "localhost") return route.continue();
    external.add(hostname);
    return route.abort();
  });
  const page = await context.newPage();
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  await page.goto(`${PAGES[mode]}#token=${TOKEN}`);
  await page.waitForSelector(`main[data-mode="${mode}"]`);
  return { context, page, problems, external };
}

async function ask(page, text) {
  await page.fill("#prompt", text);
  await page.click("#send");
}

function card(page, text) {
  return page.locator(".card", { has: page.locator(".arguments", { hasText: text }) });
}

async function waitForReply(page, text) {
  await page.locator(".transcript li", { hasText: text }).first().waitFor();
}

async function checkCard(item, { summary, argument, choices }) {
  await item.waitFor();
  assert.equal(await item.locator(".summary").textContent(), summary);
  const args = await item.locator(".arguments").textContent();
  assert.ok(args.includes(argument), "the complete arguments are shown");
  assert.match(await item.locator(".risk").textContent(), /^(low|medium|high|critical) risk$/);
  assert.ok((await item.locator(".reasons li").count()) >= 1, "risk reasons are shown");
  assert.match(await item.locator(".expiry").textContent(), /Expires in \d+:\d\d/);
  const labels = await item.locator(".choices button").allTextContents();
  assert.deepEqual(labels, [...choices, "Cancel"]);
}

/** Tamper the digest of the next resume this page sends (the server must refuse it). */
async function tamperNextResume(page) {
  let tampered = false;
  await page.route("**/*", async (route) => {
    const request = route.request();
    const body = request.postData();
    if (tampered || request.method() !== "POST" || !body || !body.includes('"resume"')) return route.fallback();
    tampered = true;
    const forged = body.replace(/sha256:[0-9a-f]{64}/g, `sha256:${"0".repeat(64)}`);
    return route.continue({ postData: forged });
  });
  return () => tampered;
}

for (const mode of ["runtime", "direct"]) {
  test(`${mode}: approve, deny, cancel and two interrupts at once through useInterrupt`, async () => {
    const { context, page, problems, external } = await open(mode);
    const deleteCard = { summary: "Delete a file from the shared drive", choices: ["Approve once", "Deny"] };
    try {
      // Approve — after a refused first answer: the card must come back and the action run once.
      const approvePath = `/srv/${mode}-approve.txt`;
      await ask(page, `delete ${approvePath}`);
      await checkCard(card(page, approvePath), { ...deleteCard, argument: approvePath });
      const wasTampered = await tamperNextResume(page);
      await card(page, approvePath).locator('button[data-decision="approve"]').click();
      await page.locator(".error", { hasText: "aais.digest_mismatch" }).waitFor();
      assert.ok(wasTampered());
      await card(page, approvePath).locator('button[data-decision="approve"]:not([disabled])').waitFor();
      await card(page, approvePath).locator('button[data-decision="approve"]').click();
      await waitForReply(page, `Deleted ${approvePath}.`);
      await page.locator(".card").first().waitFor({ state: "detached" });

      // Deny.
      const denyPath = `/srv/${mode}-deny.txt`;
      await ask(page, `delete ${denyPath}`);
      await checkCard(card(page, denyPath), { ...deleteCard, argument: denyPath });
      await card(page, denyPath).locator('button[data-decision="deny"]').click();
      await waitForReply(page, "Not deleted (denied).");

      // Cancel.
      const cancelPath = `/srv/${mode}-cancel.txt`;
      await ask(page, `delete ${cancelPath}`);
      await checkCard(card(page, cancelPath), { ...deleteCard, argument: cancelPath });
      await card(page, cancelPath).locator("button.cancel").click();
      await waitForReply(page, "Not deleted (cancelled).");

      // Cancel when nothing else runs: the run ends with the AG-UI "cancelled" outcome;
      // the card goes and the page keeps working (the emails below).
      const purgePath = `/srv/${mode}-purge.txt`;
      await ask(page, `purge ${purgePath}`);
      await card(page, purgePath).waitFor();
      await card(page, purgePath).locator("button.cancel").click();
      await card(page, purgePath).waitFor({ state: "detached" });

      // An approval raised inside a subgraph (the interrupt carries subagentRunId).
      const archivePath = `/srv/${mode}-archive.csv`;
      await ask(page, `archive ${archivePath}`);
      await card(page, archivePath).waitFor();
      await card(page, archivePath).locator('button[data-decision="approve"]').click();
      await card(page, archivePath).waitFor({ state: "detached" });

      // Two gated tool calls: two cards at once, one resume answering both.
      const ann = `ann-${mode}@example.com`;
      const bob = `bob-${mode}@example.com`;
      await ask(page, `email ${ann},${bob}`);
      await page.locator('.approvals[data-open="2"]').waitFor();
      const emailCard = { summary: "send_email (to, subject)", choices: ["Approve once", "Deny"] };
      await checkCard(card(page, ann), { ...emailCard, argument: ann });
      await checkCard(card(page, bob), { ...emailCard, argument: bob });
      await card(page, ann).locator('button[data-decision="approve"]').click();
      await card(page, ann).locator(".status", { hasText: "Answered" }).waitFor();
      await card(page, bob).locator('button[data-decision="deny"]').click();
      await waitForReply(page, "All done.");

      assert.deepEqual(problems, []);
      expected[mode] = {
        effects: [
          ["delete_file", approvePath],
          ["archive_file", archivePath],
          ["send_email", ann],
        ],
        never: [denyPath, cancelPath, purgePath, bob],
        external: [...external].sort(),
      };
    } finally {
      await context.close();
    }
  });
}
