// Build both pages with esbuild into dist/ and record their bundle sizes (dist/sizes.json).
//   node build.mjs            -> dist/runtime/ (full provider) and dist/direct/ (headless)
import { build } from "esbuild";
import { copyFileSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { readFileSync } from "node:fs";

const here = dirname(fileURLToPath(import.meta.url));
const sizes = {};
for (const page of ["runtime", "direct"]) {
  const out = join(here, "dist", page);
  mkdirSync(out, { recursive: true });
  await build({
    entryPoints: [join(here, "src", `${page}-page.jsx`)],
    outfile: join(out, "app.js"),
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    minify: true,
    jsx: "automatic",
    loader: { ".css": "empty" },
    define: { "process.env.NODE_ENV": '"production"' },
    logLevel: "warning",
  });
  copyFileSync(join(here, "src", "index.html"), join(out, "index.html"));
  copyFileSync(join(here, "src", "style.css"), join(out, "style.css"));
  const bundle = join(out, "app.js");
  sizes[page] = { bytes: statSync(bundle).size, gzip: gzipSync(readFileSync(bundle)).length };
}
writeFileSync(join(here, "dist", "sizes.json"), JSON.stringify(sizes, null, 2) + "\n");
console.log(JSON.stringify(sizes));
