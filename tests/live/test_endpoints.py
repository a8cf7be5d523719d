"""Every endpoint the URLconf serves, on the running service (docs/api.md#errors "no request, however
malformed, produces a 500"; docs/api.md#errors): called once with a valid body, as an operator or owner where
it needs one, then with a hostile-body set: nesting 33 and 10,000 levels deep, lone surrogates and NUL in
strings (top level and inside `meta`, `config`, lists and filter values), huge numbers, wrong types,
strings of about 1 MiB and duplicated keys. None may answer 5xx."""

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import jwt
import pyotp
import pytest
from rest_framework import serializers

from iam.http.fields import JsonObject
from iam.http.list_endpoint import ListEndpoint
from tests.authn.soft_authenticator import SoftAuthenticator
from tests.endpoints import ENDPOINTS, PATHS
from tests.live.api import META, add_member, create_client, create_role, create_workspace, ok, unique
from tests.sso.stand_ins import OpenIdProvider

SOURCE = "127.0.0.10"  # hostile logins count against this address's throttle, not the other tests'
MIB = 1024 * 1024


def test_every_family_is_enumerated():
    families = {path.split("/")[1] for path in PATHS}
    assert {"auth", "accounts", "workspace", "projects", "roles", "permissions", "memberships"} <= families
    assert {"clients", "credentials"} <= families


class World:
    """Records of one workspace owned by the operator, made over HTTP, and makers of throwaway ones for
    the endpoints that consume what they are given (delete, revoke, confirm)."""

    def __init__(self, live):
        self.live = live
        _, _, self.token = live.bootstrap_operator()
        self.root = ok(live.post("/workspace/describe", {"slug": "root"}, token=self.token))["id"]
        self.workspace = create_workspace(live, self.token)["id"]
        self.member = live.register()
        self.project = self.create("/projects/create", name=unique("p"), code=unique("c"), config=META)
        self.permission = self.create("/permissions/create", name=f"{unique('things')}:read")
        self.role = create_role(self.live, self.token, self.workspace, [self.permission["id"]])
        self.client = create_client(self.live, self.token, self.workspace)
        self.membership = add_member(live, self.token, self.workspace, self.member["account"]["id"])
        # An OpenID provider on loopback for the SSO connections (its discovery document and keys).
        self.idp = OpenIdProvider()
        self.application = self.create("/applications/create", **self.application_body())
        self.service_account = self.create(
            "/service-accounts/create", name=unique("sa"), role_ids=[self.role["id"]]
        )
        self.sso = self.create("/sso/create", **self.sso_body())
        self.sso_domain = self.sso["domains"][0]["domain"]
        slug = ok(live.post("/workspace/describe", {"id": self.workspace}, token=self.token))["slug"]
        done = live.manage("verify_domain", "--workspace", slug, "--domain", self.sso_domain)
        assert done.returncode == 0, done.stdout + done.stderr

    def application_body(self) -> dict:
        return {
            "name": unique("app"),
            "type": "web",
            "redirect_uris": [f"https://{unique('app')}.example.com/callback"],
            "tags": [],
            "meta": META,
        }

    def sso_body(self) -> dict:
        return {
            "name": unique("idp"),
            "issuer": self.idp.issuer,
            "client_id": self.idp.client_id,
            "client_secret": self.idp.client_secret,
            "domains": [f"{unique('d')}.test"],
            "default_role_ids": [self.role["id"]],
            "tags": [],
            "meta": META,
        }

    def create(self, path: str, **body) -> dict:
        body = {"tags": [], "meta": META, **body}
        return ok(self.live.post(path, body, token=self.token, workspace=self.workspace))

    def credential(self, account_id: str) -> dict:
        body = {"filter": {"fields": {"account_id": account_id}}}
        found = ok(self.live.post("/credentials/list", body, token=self.token, workspace=self.root))
        return found["credentials"][0]

    def emailed_token(self, address: str, subject: str) -> str:
        def sent() -> str | None:
            for message in self.live.emails_to(address):
                if message["Subject"] == subject:
                    text = message.get_body(("plain",)).get_content()
                    return re.search(r"token=([\w.-]+)", text).group(1)
            return None

        return self.live.wait_for(sent, 30, what=f"{subject!r} to {address}")


def valid_call(world: World, path: str) -> dict:
    """The request that should succeed on `path`: its body, token and X-Workspace."""
    live, ws = world.live, world.workspace
    account = world.member["account"]
    call = {"token": world.token, "workspace": None, "body": {}}
    endpoint = ENDPOINTS[path]
    if endpoint.workspace_scoped:
        call["workspace"] = world.root if path.startswith("/credentials/") else ws
    if endpoint.public:
        call["token"] = None
    family, action = path.split("/")[1], path.split("/")[-1]
    registered: list[dict] = []

    class Throwaway(dict):
        """An account registered on first use only (argon2 costs ~60 ms a hash)."""

        def __getitem__(self, key):
            if not registered:
                registered.append(live.register())
            return registered[0][key]

    throwaway = Throwaway()
    bodies = {
        "/accounts/create": lambda: {
            "email": f"{unique('a')}@example.com",
            "password": "pw-" + unique("x"),
            "name": "created",
        },
        "/accounts/delete": lambda: {"id": throwaway["account"]["id"]},
        "/accounts/describe": lambda: {"id": account["id"]},
        "/accounts/update": lambda: {"id": account["id"], "name": unique("renamed")},
        "/auth/confirm": lambda: {
            "token": world.emailed_token(throwaway["account"]["email"], "Confirm your e-mail address")
        },
        "/auth/login": lambda: {"email": throwaway["account"]["email"], "password": "a-long-live-passphrase"},
        "/auth/oauth/idp_a/initiate": lambda: {"redirect_url": "http://localhost:3000/after-login"},
        "/auth/register": lambda: {"email": f"{unique('r')}@example.com", "password": "pw-" + unique("x")},
        "/auth/resend-confirm": lambda: {"email": throwaway["account"]["email"]},
        "/auth/reset-password": lambda: {"email": account["email"]},
        "/auth/update-password": lambda: {
            "token": _reset_token(world, throwaway["account"]["email"]),
            "password": "pw-" + unique("new"),
        },
        "/clients/create": lambda: {"name": unique("client"), "tags": [], "meta": META},
        "/clients/describe": lambda: {"id": world.client["id"]},
        "/clients/delete": lambda: {"id": create_client(live, world.token, ws)["id"]},
        "/clients/regenerate-secret": lambda: {"id": world.client["id"]},
        "/clients/events": lambda: _events_body(create_client(live, world.token, ws)),
        "/clients/update": lambda: {"id": world.client["id"], "description": "updated"},
        "/clients/validate": lambda: {
            "client_id": world.client["id"],
            "client_secret": world.client["secret"],
            "token": world.member["access_token"],
            "permission": world.permission["name"],
        },
        "/credentials/delete": lambda: _credential_ref(world, throwaway),
        "/credentials/describe": lambda: _credential_ref(world, world.member),
        "/credentials/update": lambda: {**_credential_ref(world, world.member), "tags": ["checked"]},
        "/invitations/create": lambda: _invitation_body(world),
        "/invitations/describe": lambda: {"id": _invitation(world)["id"]},
        "/invitations/revoke": lambda: {"id": _invitation(world)["id"]},
        "/invitations/accept": lambda: {
            "token": _invitation_token(world),
            "password": "pw-" + unique("x"),
            "name": "invited",
        },
        "/invitations/decline": lambda: {"token": _invitation_token(world)},
        "/invitations/mine": lambda: {},
        "/memberships/create": lambda: {
            # A project-scope membership in a new project: each call is a new membership (no argon2).
            "account_id": account["id"],
            "scope": "project",
            "project_id": world.create("/projects/create", name=unique("m"), config=META)["id"],
            "status": "active",
            "role_ids": [world.role["id"]],
            "tags": [],
            "meta": META,
        },
        "/memberships/delete": lambda: {
            "id": add_member(live, world.token, ws, throwaway["account"]["id"])["id"]
        },
        "/memberships/describe": lambda: {"id": world.membership["id"]},
        "/memberships/update": lambda: {"id": world.membership["id"], "role_ids": [world.role["id"]]},
        "/permissions/create": lambda: {"name": f"{unique('p')}:write", "tags": [], "meta": META},
        "/permissions/delete": lambda: {
            "id": world.create("/permissions/create", name=f"{unique('d')}:x")["id"]
        },
        "/permissions/describe": lambda: {"id": world.permission["id"]},
        "/permissions/check": lambda: {"account_id": account["id"], "permission": world.permission["name"]},
        "/permissions/update": lambda: {"id": world.permission["id"], "description": "updated"},
        "/projects/create": lambda: {"name": unique("p"), "config": META, "tags": [], "meta": META},
        "/projects/delete": lambda: {
            "id": world.create("/projects/create", name=unique("d"), config=META)["id"]
        },
        "/projects/describe": lambda: {"id": world.project["id"]},
        "/projects/update": lambda: {"id": world.project["id"], "description": "updated"},
        "/roles/create": lambda: {"name": unique("r"), "permission_ids": [], "tags": [], "meta": META},
        "/roles/delete": lambda: {"id": create_role(live, world.token, ws)["id"]},
        "/roles/describe": lambda: {"id": world.role["id"]},
        "/roles/update": lambda: {"id": world.role["id"], "permission_ids": [world.permission["id"]]},
        "/applications/create": lambda: world.application_body(),
        "/applications/delete": lambda: {
            "id": world.create("/applications/create", **world.application_body())["id"]
        },
        "/applications/describe": lambda: {"id": world.application["id"]},
        "/applications/update": lambda: {"id": world.application["id"], "name": unique("app")},
        "/applications/regenerate-secret": lambda: {"id": world.application["id"]},
        "/service-accounts/create": lambda: {
            "name": unique("sa"),
            "role_ids": [world.role["id"]],
            "tags": [],
            "meta": META,
        },
        "/service-accounts/describe": lambda: {"id": world.service_account["id"]},
        "/service-accounts/update": lambda: {"id": world.service_account["id"], "name": unique("sa")},
        "/service-accounts/delete": lambda: {
            "id": world.create("/service-accounts/create", name=unique("d"), role_ids=[])["id"]
        },
        # A service account of its own each time: at most 10 live keys each.
        "/service-accounts/create-key": lambda: {
            "id": world.create("/service-accounts/create", name=unique("k"), role_ids=[])["id"],
            "name": unique("key"),
        },
        "/service-accounts/revoke-key": lambda: _key_ref(world),
        "/scim-tokens/create": lambda: {"name": unique("scim")},
        "/scim-tokens/delete": lambda: {"id": world.create("/scim-tokens/create", name=unique("d"))["id"]},
        "/sso/create": lambda: world.sso_body(),
        "/sso/delete": lambda: {"id": world.create("/sso/create", **world.sso_body())["id"]},
        "/sso/describe": lambda: {"id": world.sso["id"]},
        "/sso/update": lambda: {"id": world.sso["id"], "enabled": True},
        "/sso/verify-domain": lambda: {"id": world.sso["id"], "domain": world.sso_domain},
        "/auth/sso/initiate": lambda: {
            "connection_id": world.sso["id"],
            "redirect_url": "http://localhost:3000/after-login",
        },
        "/workspace/create": lambda: {
            "name": "w",
            "slug": unique("w"),
            "config": META,
            "tags": [],
            "meta": META,
        },
        "/workspace/delete": lambda: {"id": create_workspace(live, world.token)["id"]},
        "/workspace/describe": lambda: {"id": ws},
        "/workspace/update": lambda: {"id": ws, "description": "updated"},
    }
    invitations = ("/memberships/accept", "/memberships/decline")
    if path in ("/auth/revoke", "/auth/refresh"):
        call["token"] = throwaway["access_token"]  # not the operator's: revoke ends that account's sessions
    elif path == "/sessions/revoke":
        # The account's own current session: no recent login needed (docs/api.md#sessions), and no one else's.
        call["token"] = throwaway["access_token"]
        call["body"] = {"id": jwt.decode(call["token"], options={"verify_signature": False})["sid"]}
    elif path.startswith("/auth/mfa/"):
        # The throwaway account's own second factor (a fresh login: recent enough to enroll or disable).
        call["token"] = None if path == "/auth/mfa/verify" else throwaway["access_token"]
        secret = None
        if path != "/auth/mfa/totp/enroll":
            enrolled = ok(live.post("/auth/mfa/totp/enroll", {}, token=throwaway["access_token"]))
            secret = pyotp.TOTP(enrolled["secret"])
        if path in ("/auth/mfa/totp/disable", "/auth/mfa/verify"):
            body = {"code": secret.now()}
            ok(live.post("/auth/mfa/totp/confirm", body, token=throwaway["access_token"]))
        next_code = secret.at(time.time() + 30) if secret else None  # the confirming step is spent
        if path == "/auth/mfa/totp/confirm":
            call["body"] = {"code": secret.now()}
        elif path == "/auth/mfa/totp/disable":
            call["body"] = {"code": next_code}
        elif path == "/auth/mfa/verify":
            login = {"email": throwaway["account"]["email"], "password": "a-long-live-passphrase"}
            token = ok(live.post("/auth/login", login))["mfa_token"]
            call["body"] = {"mfa_token": token, "code": next_code}
    elif path.startswith(("/auth/passkeys/", "/passkeys/")) and action != "list":
        call["token"], call["body"] = _passkey_call(live, path)
    elif path in invitations:
        # The invited account's own act (docs/api.md#invitations): its Bearer token and the id of its
        # invitation.
        invited = add_member(live, world.token, ws, throwaway["account"]["id"], status="invited")
        call["token"], call["body"] = throwaway["access_token"], {"id": invited["id"]}
    elif path in bodies:
        call["body"] = bodies[path]()
        if action == "create" or path == "/auth/register":
            call["fresh"] = bodies[path]  # a body that creates a new record each time
    elif action != "list":
        raise AssertionError(f"no valid body for {path} ({family}): add one here")
    return call


def _passkey_call(live, path: str) -> tuple[str | None, dict]:
    """A new account, by its own fresh session (recent enough to register or delete a passkey), with a
    software authenticator's passkey where the call needs one (docs/api.md#passkeys). The authenticator
    signs for the origin of the default `IAM_PUBLIC_URL`, which the live service keeps."""
    token = live.register()["access_token"]
    if path == "/auth/passkeys/register/options":
        return token, {}
    key = SoftAuthenticator()
    options = ok(live.post("/auth/passkeys/register/options", {}, token=token))
    registration = {"credential": key.create(options), "name": "laptop"}
    if path == "/auth/passkeys/register/verify":
        return token, registration
    passkey = ok(live.post("/auth/passkeys/register/verify", registration, token=token))
    if path == "/auth/passkeys/login/options":
        return None, {}
    if path == "/auth/passkeys/login/verify":
        return None, {"credential": key.get(ok(live.post("/auth/passkeys/login/options", {})))}
    if path == "/passkeys/update":
        return token, {"id": passkey["id"], "name": "phone"}
    return token, {"id": passkey["id"]}


def _key_ref(world: World) -> dict:
    service_account = world.create("/service-accounts/create", name=unique("r"), role_ids=[])
    key = ok(
        world.live.post(
            "/service-accounts/create-key",
            {"id": service_account["id"], "name": "k"},
            token=world.token,
            workspace=world.workspace,
        )
    )
    return {"id": service_account["id"], "key_id": key["id"]}


def _invitation_body(world: World) -> dict:
    return {"email": f"{unique('i')}@example.com", "scope": "workspace", "role_ids": [world.role["id"]]}


def _invitation(world: World) -> dict:
    body = _invitation_body(world)
    return ok(world.live.post("/invitations/create", body, token=world.token, workspace=world.workspace))


def _invitation_token(world: World) -> str:
    """The link's token of an invitation to a new address, as the worker mailed it."""
    return world.emailed_token(_invitation(world)["email"], "You are invited to a workspace")


def _events_body(client: dict) -> dict:
    return {"client_id": client["id"], "client_secret": client["secret"], "after": None, "limit": 10}


def _reset_token(world: World, address: str) -> str:
    ok(world.live.post("/auth/reset-password", {"email": address}))
    return world.emailed_token(address, "Reset your password")


def _credential_ref(world: World, registered: dict) -> dict:
    return {
        "id": world.credential(registered["account"]["id"])["id"],
        "account_id": registered["account"]["id"],
    }


def nested(depth: int, kind: str) -> str:
    """A JSON object `depth` levels deep in all: objects in objects, or an array nest in a field."""
    if kind == "object":
        return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def wrap(field: serializers.Field | None, value):
    """`value` where the field expects it: inside an object (`meta`, `config`, `filter`) or a list."""
    if isinstance(field, JsonObject | serializers.DictField | serializers.Serializer):
        return {"schema_version": "1", "x": value}
    if isinstance(field, serializers.ListField):
        return [value]
    return value


SENTINELS = {"SURROGATE": "\\ud800", "NUL": "\\u0000"}  # JSON escapes: JSON allows both


def hostile_bodies(path: str, valid: dict, fresh=None) -> list[tuple[str, str]]:
    """(label, raw body) pairs. Each per-field body is the valid one (a fresh one for creates, so that no
    uniqueness check answers before the value reaches the database) with one field made hostile."""
    endpoint = ENDPOINTS[path]
    declared = dict(getattr(endpoint.request_serializer, "_declared_fields", {}))
    fields = list(declared) or ["x"]
    bodies = [
        ("depth 33, objects", nested(33, "object")),
        ("depth 33, arrays", nested(33, "array")),
        ("depth 10000, objects", nested(10_000, "object")),
        ("depth 10000, arrays", nested(10_000, "array")),
        ("surrogate key", '{"\\ud800": 1}'),
        ("NUL key", '{"\\u0000": 1}'),
        ("every field NaN", json.dumps(dict.fromkeys(fields, float("nan")))),
        ("every field -Infinity", json.dumps(dict.fromkeys(fields, float("-inf")))),
        ("every field 1e400", json.dumps(dict.fromkeys(fields, "HUGE")).replace('"HUGE"', "1e400")),
    ]
    for label, value in [("[]", []), ("{}", {}), ("true", True), ("12", 12), ("null", None), ('"x"', "x")]:
        bodies.append((f"every field {label}", json.dumps(dict.fromkeys(fields, value))))
    duplicated = json.dumps(valid)[:-1] + (", " if valid else "")
    bodies.append(("duplicated keys", duplicated + ", ".join(f'"{name}": ["dup"]' for name in fields) + "}"))
    share = (MIB - 4096) // len(fields)  # about 1 MiB of strings in all, under the 413 limit
    base = fresh() if fresh else valid
    bodies.append(
        ("~1 MiB of strings", json.dumps({**base, **{n: wrap(declared.get(n), "x" * share) for n in fields}}))
    )
    for name in fields:
        for label, marker in (("surrogate", "SURROGATE"), ("NUL", "NUL")):
            body = {**(fresh() if fresh else valid), name: wrap(declared.get(name), f"a{marker}b")}
            bodies.append((f"{name}: {label}", json.dumps(body).replace(marker, SENTINELS[marker])))
        body = json.dumps({**(fresh() if fresh else valid), name: "HUGE"})
        bodies.append((f"{name}: 400-digit integer", body.replace('"HUGE"', "9" * 400)))
    if issubclass(endpoint, ListEndpoint):
        for name in endpoint.filter_fields:
            for label, marker in (("surrogate", "SURROGATE"), ("NUL", "NUL")):
                raw = json.dumps(
                    {"filter": {"fields": {name: f"a{marker}b"}}, "options": {"order_bys": name}}
                )
                bodies.append((f"filter {name}: {label}", raw.replace(marker, SENTINELS[marker])))
            bodies.append((f"filter {name}: huge", json.dumps({"filter": {"fields": {name: 10**300}}})))
        bodies.append(("60,000 order_bys", json.dumps({"options": {"order_bys": ["created_at"] * 60_000}})))
        bodies.append(("filter tags surrogate", '{"filter": {"tags": ["\\udc00"]}}'))
    return bodies


@pytest.fixture(scope="module")
def world(live) -> World:
    return World(live)


@pytest.mark.parametrize("path", PATHS)
def test_endpoint_answers_valid_and_hostile_bodies_without_5xx(live, world, path):
    call = valid_call(world, path)
    response = live.post(path, call["body"], token=call["token"], workspace=call["workspace"])
    ok(response)

    def send(item: tuple[str, str]) -> tuple[str, int, str]:
        label, raw = item
        answer = live.post(path, raw=raw, token=call["token"], workspace=call["workspace"], source=SOURCE)
        return label, answer.status_code, answer.text[:300]

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(send, hostile_bodies(path, call["body"], call.get("fresh"))))
    server_errors = [f"{label}: {status} {text}" for label, status, text in answers if status >= 500]
    assert not server_errors, "\n".join(server_errors)
