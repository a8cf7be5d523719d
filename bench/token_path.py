"""The token endpoint in one process, for load-independent figures: `python -m bench.token_path N [GRANT]`
serves N `POST /oauth2/token` of each grant (`code`, `refresh`, `machine`; all three when GRANT is
omitted or `all`) through Django's handler after a warm-up, as a `web` application sends them (HTTP
Basic), and prints the statements (SQL and transaction control), the CPU time per grant, and that of
the PostgreSQL backend serving them when PostgreSQL runs on this machine
(docs/performance.md#latest-figures). `profile` after GRANT profiles the N grants and writes the profile
to `token-GRANT.prof`. Settings as bench/login_path.py's (DEBUG off, a Redis database of its own); it
writes a workspace, an account, a service account and two applications to DATABASE_URL's database."""

import base64
import cProfile
import hashlib
import pstats
import secrets
import sys
import time
from urllib.parse import urlencode

import django

django.setup()
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from accounts.models import Account  # noqa: E402
from authn.sessions import open_browser_session  # noqa: E402
from bench.common import backend_cpu  # noqa: E402
from oidc import services  # noqa: E402
from oidc.sessions import SignIn, new_code, save_code  # noqa: E402
from rbac.models import Membership  # noqa: E402
from rbac.services.service_accounts import create_service_account  # noqa: E402
from tenancy.models import Workspace  # noqa: E402

REDIRECT_URI = "https://bench.example/callback"
SCOPE = "openid email profile offline_access"
META = {"schema_version": "1"}

tag = secrets.token_hex(4)
ws = Workspace.objects.create(name="T" + tag, slug="t" + tag, config=META)
account = Account.objects.create(email=f"token{tag}@x.example", name="T", verified=True)
Membership.objects.create(account=account, workspace=ws, scope="workspace", status="active")
browser = open_browser_session(account, amr=["pwd"])
application, secret = services.create_application(
    ws, actor=None, name="T", type="web", redirect_uris=[REDIRECT_URI], tags=[], meta=META
)
service_account = create_service_account(ws, name="T", roles=[], tags=[], meta=META, actor=None)
machine, machine_secret = services.create_application(
    ws,
    actor=None,
    name="M",
    type="web",
    redirect_uris=[],
    grant_types=["client_credentials"],
    service_account_id=service_account.pk,
    tags=[],
    meta=META,
)
verifier = secrets.token_urlsafe(48)
challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
client = Client(HTTP_HOST="127.0.0.1")


def basic(app, plain: str) -> str:
    return "Basic " + base64.b64encode(f"{app.client_id}:{plain}".encode()).decode()


def post(body: dict, authorization: str) -> dict:
    response = client.post(
        "/oauth2/token",
        urlencode(body),
        content_type="application/x-www-form-urlencoded",
        HTTP_AUTHORIZATION=authorization,
        REMOTE_ADDR="127.0.0.1",
    )
    assert response.status_code == 200, response.content
    return response.json()


def code() -> dict:
    plain = new_code()
    save_code(
        plain,
        application=application,
        sign_in=SignIn(browser_session=browser, workspace_id=ws.pk),
        redirect_uri=REDIRECT_URI,
        scope=SCOPE,
        nonce="bench",
        code_challenge=challenge,
    )
    return {
        "grant_type": "authorization_code",
        "code": plain,
        "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier,
    }


class Grants:
    """Each grant's next request body, made outside the timed part."""

    def __init__(self):
        self.refresh_token = None

    def body(self, grant: str) -> dict:
        if grant == "code":
            return code()
        if grant == "refresh":
            if self.refresh_token is None:
                self.refresh_token = post(code(), basic(application, secret))["refresh_token"]
            return {"grant_type": "refresh_token", "refresh_token": self.refresh_token}
        return {"grant_type": "client_credentials"}

    def send(self, grant: str, body: dict) -> None:
        if grant == "machine":
            post(body, basic(machine, machine_secret))
            return
        answer = post(body, basic(application, secret))
        if grant == "refresh":
            self.refresh_token = answer["refresh_token"]


def main() -> None:
    n = int(sys.argv[1])
    chosen = sys.argv[2:3] or ["code", "refresh", "machine"]
    if chosen == ["all"]:
        chosen = ["code", "refresh", "machine"]
    profile = sys.argv[3:] == ["profile"]
    grants = Grants()
    for grant in chosen:
        for _ in range(5):
            grants.send(grant, grants.body(grant))
        body = grants.body(grant)
        with CaptureQueriesContext(connection) as queries:
            grants.send(grant, body)
        print(f"{grant}: {len(queries.captured_queries)} statements per grant")
        for query in queries.captured_queries:
            print("   ", query["sql"][:200])
        bodies = [grants.body(grant) for _ in range(n)] if grant != "refresh" else None
        profiler = cProfile.Profile() if profile else None
        database_before = backend_cpu()
        started = time.process_time()
        if profiler:
            profiler.enable()
        for i in range(n):
            grants.send(grant, bodies[i] if bodies else grants.body(grant))
        if profiler:
            profiler.disable()
        per_grant = (time.process_time() - started) / n * 1000 if n else 0
        database_after = backend_cpu()
        print(f"{grant}: {per_grant:.2f} ms CPU per grant ({n})")
        if database_before is not None and database_after is not None and n:
            print(f"{grant}: {(database_after - database_before) / n * 1000:.2f} ms PostgreSQL CPU per grant")
        if profiler:
            profiler.dump_stats(f"token-{grant}.prof")
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


main()
