"""Stand-ins that the SSO tests run on loopback: a small OpenID Connect provider (discovery, JWKS,
authorization code with PKCE S256, RS256 ID tokens signed with `cryptography` keys) and a DNS server
answering TXT queries (dnspython's wire format, a real UDP socket: the service's resolver is not mocked)."""

import base64
import hashlib
import json
import secrets
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class OpenIdProvider:
    """Tests change `claims` (what the next login's ID token says), `id_token_overrides` (claims forced
    into the ID token: a wrong `aud`, `nonce`, `iss`), `signing_key` (a key the JWKS does not publish),
    `discovery` (the document answered), `email_in_id_token` (False: the e-mail only at user-info),
    `delays` (a route, such as `/token`, -> seconds to wait before answering it)."""

    def __init__(self, *, client_id="iam-sso", client_secret="sso-secret", path=""):
        self.client_id = client_id
        self.client_secret = client_secret
        self.key = new_key()
        self.signing_key = self.key
        self.kid = secrets.token_hex(4)
        self.claims = {"sub": "user-1", "email": "alice@acme.test", "email_verified": True, "name": "Alice"}
        self.id_token_overrides: dict = {}
        self.email_in_id_token = True
        self.codes: dict[str, dict] = {}
        self.access: dict[str, dict] = {}
        self.requests: list[str] = []
        self.token_auth: list[str] = []
        self.delays: dict[str, float] = {}
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                parts = urlsplit(self.path)
                provider.requests.append(parts.path)
                route = parts.path.removeprefix(path)
                time.sleep(provider.delays.get(route, 0))
                if route == "/.well-known/openid-configuration":
                    document = provider.discovery
                    if isinstance(document, int):
                        provider.answer(self, document, {"error": "nope"})
                    else:
                        provider.answer(self, 200, document)
                elif route == "/jwks":
                    provider.answer(self, 200, provider.jwks())
                elif route == "/authorize":
                    provider.authorize(self, dict(parse_qsl(parts.query)))
                elif route == "/userinfo":
                    provider.userinfo(self)
                else:
                    provider.answer(self, 404, {"error": "not_found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(parse_qsl(self.rfile.read(length).decode()))
                if urlsplit(self.path).path.removeprefix(path) == "/token":
                    time.sleep(provider.delays.get("/token", 0))
                    provider.token(self, form)
                else:
                    provider.answer(self, 404, {"error": "not_found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        self.discovery = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        }
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def answer(handler, status, body, headers=None):
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def jwks(self) -> dict:
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def authorize(self, handler, query):
        if query.get("client_id") != self.client_id or query.get("code_challenge_method") != "S256":
            return self.answer(handler, 400, {"error": "invalid_request"})
        code = secrets.token_urlsafe(16)
        self.codes[code] = {**query, "claims": dict(self.claims)}
        target = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
        handler.send_response(302)
        handler.send_header("Location", target)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _client(self, handler, form) -> bool:
        header = handler.headers.get("Authorization", "")
        if header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
            self.token_auth.append("basic")
        else:
            client_id, secret = form.get("client_id"), form.get("client_secret")
            self.token_auth.append("post")
        return client_id == self.client_id and secret == self.client_secret

    def token(self, handler, form):
        if not self._client(handler, form):
            return self.answer(handler, 401, {"error": "invalid_client"})
        grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or form.get("redirect_uri") != grant["redirect_uri"]:
            return self.answer(handler, 400, {"error": "invalid_grant"})
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if challenge != grant["code_challenge"]:
            return self.answer(handler, 400, {"error": "invalid_grant"})
        claims = grant["claims"]
        now = int(time.time())
        id_claims = {
            "iss": self.issuer,
            "aud": self.client_id,
            "sub": claims["sub"],
            "iat": now,
            "exp": now + 300,
            "nonce": grant.get("nonce"),
        }
        if self.email_in_id_token:
            id_claims |= {k: v for k, v in claims.items() if k != "sub"}
        id_claims |= self.id_token_overrides
        id_token = jwt.encode(
            {k: v for k, v in id_claims.items() if v is not None},
            self.signing_key,
            algorithm="RS256",
            headers={"kid": self.kid},
        )
        access = secrets.token_urlsafe(16)
        self.access[access] = claims
        self.answer(
            handler,
            200,
            {"access_token": access, "token_type": "Bearer", "expires_in": 300, "id_token": id_token},
            {"Cache-Control": "no-store"},
        )

    def userinfo(self, handler):
        token = handler.headers.get("Authorization", "").removeprefix("Bearer ")
        claims = self.access.get(token)
        if claims is None:
            return self.answer(handler, 401, {"error": "invalid_token"})
        self.answer(handler, 200, claims)


class DnsServer:
    """Answers TXT queries over UDP on loopback from `records` (name -> list of strings); any other name
    NXDOMAIN. `address` is what IAM_DNS_NAMESERVERS takes."""

    def __init__(self):
        self.records: dict[str, list[str]] = {}
        self.queries: list[str] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.running = True
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while self.running:
            try:
                data, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            try:
                query = dns.message.from_wire(data)
            except Exception:
                continue
            response = dns.message.make_response(query)
            question = query.question[0]
            name = question.name.to_text(omit_final_dot=True).lower()
            self.queries.append(name)
            values = self.records.get(name)
            if values is None:
                response.set_rcode(dns.rcode.NXDOMAIN)
            elif question.rdtype == dns.rdatatype.TXT:
                quoted = [f'"{value}"' for value in values]
                response.answer.append(
                    dns.rrset.from_text_list(question.name, 60, dns.rdataclass.IN, dns.rdatatype.TXT, quoted)
                )
            self.sock.sendto(response.to_wire(), peer)

    def close(self):
        self.running = False
        self.sock.close()
