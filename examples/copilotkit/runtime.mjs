// Deployment 1's server: CopilotKit's runtime with one AG-UI HttpAgent pointed at aais_agui's
// /agent, plus the built page (dist/runtime) on the same origin. The runtime forwards the
// browser's Authorization header to the agent, so aais_agui authenticates the real user.
//
//   COPILOTKIT_TELEMETRY_DISABLED=true node runtime.mjs --agent-url http://127.0.0.1:8000/agent --port 3000
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

process.env.COPILOTKIT_TELEMETRY_DISABLED ??= "true";
const { values } = parseArgs({
  options: {
    "agent-url": { type: "string" },
    port: { type: "string", default: "3000" },
    host: { type: "string", default: "127.0.0.1" },
  },
});
if (!values["agent-url"]) throw new Error("--agent-url is required (aais_agui's AG-UI endpoint)");

const runtime = new CopilotRuntime({
  agents: { default: new HttpAgent({ url: values["agent-url"] }) },
});
const copilotkit = createCopilotNodeListener({ runtime, basePath: "/api/copilotkit" });

const pages = join(dirname(fileURLToPath(import.meta.url)), "dist", "runtime");
const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css" };

async function page(request, response) {
  const path = new URL(request.url, "http://localhost").pathname;
  const name = normalize(path === "/" ? "/index.html" : path).replace(/^\/+/, "");
  if (name.includes("..") || !(name in { "index.html": 1, "app.js": 1, "style.css": 1 })) {
    response.writeHead(404).end("not found");
    return;
  }
  const body = await readFile(join(pages, name));
  response.writeHead(200, { "Content-Type": types[name.slice(name.lastIndexOf("."))], "Cache-Control": "no-store" });
  response.end(body);
}

createServer((request, response) => {
  if (request.url.startsWith("/api/copilotkit")) return copilotkit(request, response);
  if (request.url === "/health") return response.writeHead(200).end("ok");
  page(request, response).catch((error) => response.writeHead(500).end(String(error)));
}).listen(Number(values.port), values.host, () => {
  console.log(`CopilotKit runtime on http://${values.host}:${values.port}/ -> ${values["agent-url"]}`);
});
