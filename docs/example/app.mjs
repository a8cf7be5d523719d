// An app that signs its users in through the IAM service and checks each request's token with
// clients/validate: docs/integration.md's five-minute path. Node 20; `npm ci`, then
//   IAM_URL=http://127.0.0.1:8000 APP_CLIENT_ID=... APP_CLIENT_SECRET=... \
//   BACKEND_CLIENT_ID=... BACKEND_CLIENT_SECRET=... node app.mjs
// and open http://localhost:3000. APP_*: the application (`applications/create`, redirect URI
// http://localhost:3000/callback); BACKEND_*: the client that validates tokens (`clients/create`).
import crypto from 'node:crypto';
import http from 'node:http';

import * as oidc from 'openid-client';

const env = process.env;
const iam = env.IAM_URL || 'http://127.0.0.1:8000';
const port = Number(env.PORT || 3000);
const home = `http://localhost:${port}`;
const config = await oidc.discovery(new URL(iam), env.APP_CLIENT_ID, env.APP_CLIENT_SECRET, undefined, {
  execute: iam.startsWith('http:') ? [oidc.allowInsecureRequests] : [], // development on plain http
});
const sessions = new Map(); // this app's own sessions, by a random cookie: here in memory

async function validate(accessToken) {
  // The authoritative answer for each request: is the token good, who is it, may they do this?
  const response = await fetch(`${iam}/clients/validate`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      client_id: env.BACKEND_CLIENT_ID,
      client_secret: env.BACKEND_CLIENT_SECRET,
      token: accessToken,
    }),
  });
  return (await response.json()).data;
}

function page(res, status, html, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', ...headers });
  res.end(`<!DOCTYPE html><html lang="en"><title>Example app</title><body>${html}</body></html>`);
}

const escape = (text) => String(text).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

async function handle(req, res) {
  const url = new URL(req.url, home);
  const sid = /(?:^|; )app_session=([\w-]+)/.exec(req.headers.cookie || '')?.[1];
  const session = sessions.get(sid);
  if (url.pathname === '/login') {
    const state = oidc.randomState();
    const verifier = oidc.randomPKCECodeVerifier();
    const nonce = oidc.randomNonce();
    const id = crypto.randomUUID();
    sessions.set(id, { state, verifier, nonce });
    const target = oidc.buildAuthorizationUrl(config, {
      redirect_uri: `${home}/callback`,
      scope: 'openid email profile offline_access',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    return page(res, 302, '', { Location: target.href, 'Set-Cookie': `app_session=${id}; HttpOnly; SameSite=Lax; Path=/` });
  }
  if (url.pathname === '/callback' && session?.verifier) {
    const tokens = await oidc.authorizationCodeGrant(config, url, {
      pkceCodeVerifier: session.verifier,
      expectedState: session.state,
      expectedNonce: session.nonce,
    });
    sessions.set(sid, { tokens, claims: tokens.claims() }); // the code is spent; no token left in a URL
    return page(res, 302, '', { Location: '/' });
  }
  if (url.pathname === '/logout' && session?.tokens) {
    sessions.delete(sid);
    const target = oidc.buildEndSessionUrl(config, { id_token_hint: session.tokens.id_token, post_logout_redirect_uri: home });
    return page(res, 302, '', { Location: target.href });
  }
  if (url.pathname !== '/') return page(res, 404, 'Not found');
  if (!session?.tokens) return page(res, 200, '<h1>Example app</h1><p><a href="/login">Sign in</a></p>');
  const answer = await validate(session.tokens.access_token);
  return page(
    res,
    200,
    `<h1>Signed in as ${escape(session.claims.email)}</h1>
     <p id="validated">clients/validate: authorized ${answer.authorized}, roles ${escape(answer.roles.join(', '))}</p>
     <p><a href="/logout">Sign out</a></p>`,
  );
}

http
  .createServer((req, res) => handle(req, res).catch((error) => page(res, 500, escape(error.message))))
  .listen(port, () => console.log(`listening ${home}`));
