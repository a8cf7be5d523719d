"""The warm path in one process, for load-independent figures: the web worker's application
(`iam.server.app.ReadWhole` around Django: the body read on the loop, the thread hop, the middleware, the
view) serves `python -m bench.warm_path PHASE N` requests of PHASE (`ping`, the bare view, or `validate`)
after the same warm-up in every phase, and prints their CPU time. Under callgrind the instructions per
request are (the run with N) minus (the run with `none 0`), over N (docs/performance.md#latest-figures):

    DJANGO_SETTINGS_MODULE=bench.settings valgrind --tool=callgrind --callgrind-out-file=validate.out \
        python -m bench.warm_path validate 300

It needs the settings of a production start (DEBUG off: SECRET_KEY, IAM_JWT_SIGNING_KEY, DATABASE_URL,
REDIS_URL; give it a Redis server of its own: any FLUSHDB on the server empties the local layer) and
writes a workspace, two accounts and a client to DATABASE_URL's database."""

import asyncio
import json
import secrets
import sys
import time

import django

django.setup()
from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from accounts.models import Account  # noqa: E402
from authn.sessions import issue_session  # noqa: E402
from clients.services import create_client  # noqa: E402
from iam.server.app import ReadWhole  # noqa: E402
from rbac.models import Membership, Permission, Role  # noqa: E402
from tenancy.models import Workspace  # noqa: E402

tag = secrets.token_hex(4)
ws = Workspace.objects.create(name="W" + tag, slug="w" + tag, config={"schema_version": "1"})
op = Account.objects.create(email=f"op{tag}@x.example", name="Op", verified=True, is_superuser=True)
member = Account.objects.create(email=f"m{tag}@x.example", name="M", verified=True)
perm = Permission.objects.create(workspace=ws, name="projects:*")
role = Role.objects.create(workspace=ws, name="editor")
role.permissions.add(perm)
Membership.objects.create(account=member, workspace=ws, scope="workspace", status="active").roles.add(role)
client, secret = create_client(ws, name="bench", tags=[], meta={"schema_version": "1"}, actor=op)
body = json.dumps(
    {
        "client_id": str(client.pk),
        "client_secret": secret,
        "token": issue_session(member, amr=["pwd"])["access_token"],
        "permission": "projects:update",
    }
).encode()
app = ReadWhole(
    get_wsgi_application(),
    threads=2,
    max_body=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
    buffer_bytes=settings.IAM_WEB_BUFFER_BYTES,
)


async def request(method, path, content=b""):
    headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")]
    if content:
        headers.append((b"content-length", str(len(content)).encode()))
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
        "scheme": "http",
        "http_version": "1.1",
        "extensions": {},
    }
    sent = []

    async def receive():
        return {"type": "http.request", "body": content, "more_body": False}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 200, sent
    return b"".join(bytes(m.get("body", b"")) for m in sent[1:])


async def main():
    for _ in range(30):
        await request("GET", "/bench/ping")
        answer = await request("POST", "/clients/validate", body)
    assert b'"allowed":true' in answer, answer
    phase, n = sys.argv[1], int(sys.argv[2])
    started = time.process_time()
    for _ in range(n if phase != "none" else 0):
        if phase == "ping":
            await request("GET", "/bench/ping")
        else:
            await request("POST", "/clients/validate", body)
    if n and phase != "none":
        print(f"{phase}: {(time.process_time() - started) / n * 1e6:.0f} us CPU per request")


asyncio.run(main())
app.executor.shutdown()
