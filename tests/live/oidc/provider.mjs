// A real OpenID provider for the live layer: panva's oidc-provider (OpenID Certified), on loopback.
// Usage: node provider.mjs '<json config>' with
//   {"port": 12345, "path": "/realm", "clients": [{"client_id", "client_secret", "redirect_uris"}],
//    "accounts": {"<sub>": {"email", "email_verified", "name"}}}
// The issuer is http://127.0.0.1:<port><path>. Logging in is the interaction a browser would do: the
// test GETs /interaction/<uid>?sub=<sub> (the login form's submission); consent is granted at once for
// the scopes asked. Prints "listening <issuer>" once it accepts connections.
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';

import Provider from 'oidc-provider';

const config = JSON.parse(process.argv[2]);
const path = config.path || '';
const issuer = `http://127.0.0.1:${config.port}${path}`;
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'live-1', use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  clients: config.clients.map((client) => ({
    ...client,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: client.token_endpoint_auth_method || 'client_secret_basic',
  })),
  jwks: { keys: [jwk] },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  features: { devInteractions: { enabled: false } },
  pkce: { required: () => true },
  cookies: { keys: ['live-layer-cookie-key'] },
  async findAccount(ctx, sub) {
    const account = config.accounts[sub];
    if (!account) return undefined;
    return { accountId: sub, async claims() { return { sub, ...account }; } };
  },
  interactions: { url: (ctx, interaction) => `${path}/interaction/${interaction.uid}` },
});
provider.proxy = false;

async function interaction(req, res) {
  const url = new URL(req.url, issuer);
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  if (prompt.name === 'login') {
    const sub = url.searchParams.get('sub');
    if (!sub) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ uid: details.uid, prompt: prompt.name }));
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: sub } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  grant.addOIDCScope(String(params.scope));
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
const server = http.createServer((req, res) => {
  const local = req.url.startsWith(path) ? req.url.slice(path.length) || '/' : null;
  if (local === null) {
    res.writeHead(404);
    res.end();
    return;
  }
  if (local.startsWith('/interaction/')) {
    interaction(req, res).catch((error) => {
      res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(String(error));
    });
    return;
  }
  req.originalUrl = req.url;
  req.url = local;
  callback(req, res);
});
server.listen(config.port, '127.0.0.1', () => console.log(`listening ${issuer}`));
