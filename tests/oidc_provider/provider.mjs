// A real OpenID provider on loopback for the sign-in tests: node-oidc-provider with one
// confidential client (PKCE required), three people and a login form that checks passwords.
//
//   node provider.mjs PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI
//
// alice (group sre), bob (dev), carol and dave (finance) and erin (audit); each one's password is "<name>-password".
// Signing in grants the scopes asked for (no consent page). Prints
// "oidc-provider: serving on <issuer>" once it listens; stops on SIGTERM/SIGINT.

import { generateKeyPairSync } from "node:crypto";
import { createServer } from "node:http";
import Provider from "oidc-provider";

const [port, clientId, clientSecret, redirectUri] = process.argv.slice(2);
if (!port || !clientId || !clientSecret || !redirectUri) {
  process.stderr.write("usage: node provider.mjs PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI\n");
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;

const PEOPLE = {
  alice: { name: "Alice", groups: ["sre"] },
  bob: { name: "Bob", groups: ["dev"] },
  carol: { name: "Carol", groups: ["finance"] },
  dave: { name: "Dave", groups: ["finance"] },
  erin: { name: "Erin", groups: ["audit"] },
};

const signingKey = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({
  format: "jwk",
});

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      response_types: ["code"],
      grant_types: ["authorization_code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  pkce: { required: () => true },
  scopes: ["openid", "profile", "groups"],
  claims: { openid: ["sub"], profile: ["name"], groups: ["groups"] },
  async findAccount(ctx, sub) {
    const person = PEOPLE[sub];
    if (!person) return undefined;
    return { accountId: sub, claims: async () => ({ sub, ...person }) };
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  features: { devInteractions: { enabled: false } },
  cookies: { keys: ["a cookie key for the test provider only"] },
  jwks: { keys: [{ ...signingKey, kid: "test-signing-key", use: "sig", alg: "RS256" }] },
  ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 3600, Grant: 3600 },
});

function page(uid, message = "") {
  const note = message ? `<p role="alert">${message}</p>` : "";
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in</title></head>
<body><h1>Test identity provider</h1>${note}
<form method="post" action="/interaction/${uid}">
<label>User <input name="login" autocomplete="username" required></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button type="submit">Sign in</button></form></body></html>`;
}

async function body(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

async function interaction(req, res, uid) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error("interaction mismatch");
  if (req.method === "GET") {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
    res.end(page(uid));
    return;
  }
  const form = await body(req);
  const login = form.get("login") || "";
  if (!Object.hasOwn(PEOPLE, login) || form.get("password") !== `${login}-password`) {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
    res.end(page(uid, "Wrong user or password."));
    return;
  }
  const grant = new provider.Grant({ accountId: login, clientId: details.params.client_id });
  grant.addOIDCScope(String(details.params.scope || "openid"));
  const grantId = await grant.save();
  await provider.interactionFinished(
    req,
    res,
    { login: { accountId: login }, consent: { grantId } },
    { mergeWithLastSubmission: false },
  );
}

const handler = provider.callback();
const server = createServer((req, res) => {
  const match = /^\/interaction\/([\w-]+)$/.exec(new URL(req.url, issuer).pathname);
  if (!match) {
    handler(req, res);
    return;
  }
  interaction(req, res, match[1]).catch((error) => {
    res.writeHead(400, { "content-type": "text/plain; charset=utf-8" });
    res.end(`interaction failed: ${error.message}`);
  });
});
server.listen(Number(port), "127.0.0.1", () => {
  process.stdout.write(`oidc-provider: serving on ${issuer}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => server.close(() => process.exit(0)));
