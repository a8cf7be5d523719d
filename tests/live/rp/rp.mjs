// The live layer's relying party: an app that signs its users in through the service with panva's
// openid-client (OpenID Certified), as any app would. Usage: node rp.mjs '<json config>' with
//   {"port", "issuer", "client_id", "client_secret"? (none: a public client), "cert", "key"}
// It serves https://127.0.0.1:<port> (the certificate the test made: a web application's redirect URI
// is https) and keeps the one person signed in to it in memory:
//   GET /login?<authorization parameters>  a new authorization request (PKCE S256, state, nonce)
//   GET /callback                          the code exchange; the ID token checked by openid-client
//   GET /state                             what the app holds: the ID token's claims, the tokens
//   GET /refresh | /userinfo | /introspect | /revoke   the library's calls with what it holds
//   GET /logout                            RP-initiated logout with the ID token as hint; back at /bye
// Every answer is JSON; a library error is status 400 with its `error`, `code` and `message`.
// Prints "listening <url>" once it accepts connections.
import fs from 'node:fs';
import https from 'node:https';

import * as client from 'openid-client';

const settings = JSON.parse(process.argv[2]);
const base = `https://127.0.0.1:${settings.port}`;
const config = await client.discovery(
  new URL(settings.issuer),
  settings.client_id,
  settings.client_secret ? { client_secret: settings.client_secret } : undefined,
  settings.client_secret ? client.ClientSecretBasic(settings.client_secret) : client.None(),
  { execute: [client.allowInsecureRequests] }, // the service listens on plain HTTP on loopback
);

const pending = new Map(); // state -> {verifier, nonce}
let held = {}; // the signed-in person's tokens and ID token claims

function answer(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function refused(res, error) {
  answer(res, 400, { error: error.error || error.name, code: error.code, message: error.message });
}

function hold(tokens) {
  held = {
    access_token: tokens.access_token,
    refresh_token: tokens.refresh_token,
    id_token: tokens.id_token,
    scope: tokens.scope,
    expires_in: tokens.expires_in,
    claims: tokens.claims(),
  };
  return held;
}

const routes = {
  async '/login'(req, res, url) {
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const parameters = {
      redirect_uri: `${base}/callback`,
      scope: 'openid email profile offline_access',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
      ...Object.fromEntries(url.searchParams),
    };
    pending.set(state, { verifier, nonce });
    res.writeHead(302, { Location: client.buildAuthorizationUrl(config, parameters).href });
    res.end();
  },
  async '/callback'(req, res, url) {
    const expected = pending.get(url.searchParams.get('state')) || {};
    const tokens = await client.authorizationCodeGrant(config, url, {
      pkceCodeVerifier: expected.verifier,
      expectedState: url.searchParams.get('state'),
      expectedNonce: expected.nonce,
      idTokenExpected: true,
    });
    answer(res, 200, { signed_in: hold(tokens).claims, callback: url.href });
  },
  async '/state'(req, res) {
    answer(res, 200, held);
  },
  async '/refresh'(req, res) {
    answer(res, 200, hold(await client.refreshTokenGrant(config, held.refresh_token)));
  },
  async '/userinfo'(req, res) {
    answer(res, 200, await client.fetchUserInfo(config, held.access_token, held.claims.sub));
  },
  async '/introspect'(req, res, url) {
    const which = url.searchParams.get('token') || 'access_token';
    answer(res, 200, await client.tokenIntrospection(config, held[which]));
  },
  async '/revoke'(req, res, url) {
    const which = url.searchParams.get('token') || 'refresh_token';
    await client.tokenRevocation(config, held[which]);
    answer(res, 200, { revoked: which });
  },
  async '/logout'(req, res) {
    const target = client.buildEndSessionUrl(config, {
      id_token_hint: held.id_token,
      post_logout_redirect_uri: `${base}/bye`,
      state: 'bye-state',
    });
    res.writeHead(302, { Location: target.href });
    res.end();
  },
  async '/bye'(req, res, url) {
    answer(res, 200, { signed_out: true, state: url.searchParams.get('state') });
  },
};

const server = https.createServer(
  { cert: fs.readFileSync(settings.cert), key: fs.readFileSync(settings.key) },
  (req, res) => {
    const url = new URL(req.url, base);
    const route = routes[url.pathname];
    if (!route) {
      answer(res, 404, { error: 'not_found' });
      return;
    }
    route(req, res, url).catch((error) => refused(res, error));
  },
);
server.listen(settings.port, '127.0.0.1', () => console.log(`listening ${base}`));
