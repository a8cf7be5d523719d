"""Password logins in one process, for load-independent figures: `python -m bench.login_path N` serves N
`POST /auth/login` through Django's handler after a warm-up and prints the statements (SQL and
transaction control) and the CPU time per login, with argon2id's verify alone beside it, and that of the
PostgreSQL backend serving them when PostgreSQL runs on this machine. Under callgrind,
with `md5` after N (the password checked by Django's MD5 hasher: the instructions outside the password
check), a login's instructions are (the run with N) minus (the run with 0), over N + 1
(docs/performance.md#latest-figures). Settings as bench/warm_path.py's (DEBUG off, a Redis database of
its own); it writes a workspace and an account with a password credential to DATABASE_URL's database."""

import json
import secrets
import sys
import time

import django

django.setup()
from django.contrib.auth.hashers import check_password, make_password  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, override_settings  # noqa: E402

from accounts.models import Account  # noqa: E402
from authn.models import Credential  # noqa: E402
from bench.common import backend_cpu  # noqa: E402
from tenancy.models import Workspace  # noqa: E402

PASSWORD = "correct-horse-battery-staple"
if sys.argv[2:] == ["md5"]:
    # Under callgrind: the password checked by a cheap hasher, so that a run takes minutes, not hours;
    # argon2id's own cost is measured apart (the run without `md5`).
    override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]).enable()
tag = secrets.token_hex(4)
encoded = make_password(PASSWORD)
ws = Workspace.objects.create(name="L" + tag, slug="l" + tag, config={"schema_version": "1"})
account = Account.objects.create(email=f"login{tag}@x.example", name="L", verified=True, password=encoded)
Credential.objects.create(
    account=account, workspace=ws, kind="password", provider="local", status="active", email=account.email
)
body = json.dumps({"email": account.email, "password": PASSWORD})
client = Client(HTTP_HOST="127.0.0.1")


def login():
    response = client.post("/auth/login", body, content_type="application/json", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200, response.content


for _ in range(5):
    login()
n = int(sys.argv[1])
if n:
    with CaptureQueriesContext(connection) as queries:
        login()
    print(f"{len(queries.captured_queries)} statements per login:")
    for query in queries.captured_queries:
        print("   ", query["sql"][:160])
    database_before, started = backend_cpu(), time.process_time()
    for _ in range(n):
        login()
    per_login = (time.process_time() - started) / n * 1000
    database_after = backend_cpu()
    started = time.process_time()
    for _ in range(n):
        check_password(PASSWORD, encoded)
    verify = (time.process_time() - started) / n * 1000
    rest = per_login - verify
    print(f"login {per_login:.2f} ms CPU, argon2id verify alone {verify:.2f} ms: the rest {rest:.2f} ms")
    if database_before is not None and database_after is not None:
        print(f"login: {(database_after - database_before) / n * 1000:.2f} ms PostgreSQL CPU per login")
