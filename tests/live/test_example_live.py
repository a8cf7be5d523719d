"""docs/integration.md's five-minute path, run as written: the example app (docs/example/app.mjs, with its
lock file) signs a person in through the hosted pages and checks the token with `clients/validate`.
The service runs as `make run` serves it (DEBUG on: a `web` application may redirect to
http://localhost), with PostgreSQL and Redis; Chromium is the person's browser."""

import os
import shutil
import subprocess
from pathlib import Path

from .api import META, ok, unique
from .conftest import PASSWORD, Process, free_port, wait_for, web_command
from .test_oidc_live import chromium, unavailable  # noqa: F401 (a fixture)

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "example"


def _example_ready() -> str | None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "the example app needs node and npm"
    if not (EXAMPLE / "node_modules" / "openid-client").exists():
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=EXAMPLE, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            return f"npm ci in docs/example failed: {done.stderr[-500:]}"
    return None


def test_the_example_app_signs_in_and_validates(live, chromium):  # noqa: F811
    reason = _example_ready()
    if reason:
        unavailable(reason)
    port = free_port()
    iam = f"http://127.0.0.1:{port}"
    tier = live.spawn(f"web-dev-{port}", web_command(port, 1), {"DEBUG": "true", "IAM_PUBLIC_URL": iam})
    live.wait_for_web(tier, iam)

    # The five-minute path's API calls: an account, its workspace, the application and the client.
    email = f"{unique('ada')}@example.com"
    ada = live.register(email=email)
    token = ada["access_token"]
    slug = unique("acme")
    body = {"name": "Acme", "slug": slug, "config": META, "tags": [], "meta": META}
    workspace = ok(live.post("/workspace/create", body, token=token))["id"]
    app_port = free_port()
    home = f"http://localhost:{app_port}"
    application = ok(
        live.post(
            "/applications/create",
            {
                "name": "Example app",
                "type": "web",
                "redirect_uris": [f"{home}/callback"],
                "post_logout_redirect_uris": [home],
                "tags": [],
                "meta": META,
            },
            token=token,
            workspace=workspace,
            base=iam,  # the service as `make run` serves it
        )
    )
    backend = ok(
        live.post(
            "/clients/create",
            {"name": "example-backend", "tags": [], "meta": META},
            token=token,
            workspace=workspace,
        )
    )
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("NODE_")},
        "IAM_URL": iam,
        "PORT": str(app_port),
        "APP_CLIENT_ID": application["client_id"],
        "APP_CLIENT_SECRET": application["client_secret"],
        "BACKEND_CLIENT_ID": backend["id"],
        "BACKEND_CLIENT_SECRET": backend["secret"],
    }
    app = Process("example-app", ["node", str(EXAMPLE / "app.mjs")], env, live.tmp / "example-app.log")
    live.processes.append(app)
    wait_for(lambda: "listening" in app.tail() or not app.alive(), 30, what="the example app to listen")
    assert app.alive(), app.tail()

    context = chromium.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(home)
    page.get_by_role("link", name="Sign in").click()
    page.get_by_label("Email").fill(email)
    page.get_by_role("button", name="Continue").click()
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Allow").click()  # the owner's own workspace's application: consent
    page.wait_for_url(f"{home}/")
    assert page.locator("h1").inner_text() == f"Signed in as {email}"
    assert page.locator("#validated").inner_text() == "clients/validate: authorized true, roles owner"
    page.get_by_role("link", name="Sign out").click()
    page.wait_for_url(f"{home}/")
    assert page.get_by_role("link", name="Sign in").count() == 1
    context.close()
    app.stop()
    tier.stop()
