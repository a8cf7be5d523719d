"""The admin over HTTP with the deployed settings (DEBUG off, secure cookies, CSRF): an operator signs in
with the login form and sends a client a test event, which the real worker delivers signed; the sign-in
and the API login before it, have set the operator's `last_login`."""

import json
import re

import requests
import standardwebhooks

from tests.live.api import create_client, create_workspace
from tests.live.conftest import OPERATOR_EMAIL, PASSWORD

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class AdminBrowser:
    """A browser on the admin. The service's cookies are `Secure` (DEBUG off) and the live layer speaks
    plain HTTP on loopback, so it keeps them itself, as a browser behind TLS would."""

    def __init__(self, live):
        self.live = live
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, data: dict | None = None) -> requests.Response:
        headers = {"Cookie": "; ".join(f"{name}={value}" for name, value in self.cookies.items())}
        response = requests.request(
            method, f"{self.live.url}{path}", data=data, headers=headers, allow_redirects=False, timeout=30
        )
        self.cookies.update({cookie.name: cookie.value for cookie in response.cookies})
        return response

    def form_token(self, path: str) -> str:
        response = self.request("GET", path)
        assert response.status_code == 200, response.text[:2000]
        return TOKEN.search(response.text).group(1)

    def sign_in(self, email: str, password: str) -> None:
        token = self.form_token("/admin/login/")
        body = {"username": email, "password": password, "csrfmiddlewaretoken": token}
        response = self.request("POST", "/admin/login/?next=/admin/", body)
        assert response.status_code == 302 and response.headers["Location"] == "/admin/", response.text[:2000]


def test_an_operator_sends_a_client_a_test_event_through_the_worker(live, receiver):
    _, _, token = live.bootstrap_operator()
    workspace = create_workspace(live, token)["id"]
    client = create_client(live, token, workspace, endpoint=receiver.url)
    quiet = create_client(live, token, workspace)  # no endpoint
    browser = AdminBrowser(live)
    browser.sign_in(OPERATOR_EMAIL, PASSWORD)
    changelist = "/admin/clients/client/"
    action = {"action": "send_test_events", "_selected_action": [client["id"], quiet["id"]]}

    refused = browser.request("POST", changelist, action)  # no CSRF token
    assert refused.status_code == 403

    csrf = browser.form_token(changelist)
    response = browser.request("POST", changelist, {**action, "csrfmiddlewaretoken": csrf})
    assert response.status_code == 302, response.text[:2000]
    page = browser.request("GET", changelist)
    assert "Test event sent to 1 client(s)" in page.text
    assert "No test event for 1 client(s) without an endpoint" in page.text

    [event] = receiver.wait_for(1)
    body = event["body"]
    assert (body["type"], body["workspace_id"]) == ("client.test", workspace)
    assert body["data"] == {"account_ids": [], "resource": {"type": "client", "id": client["id"]}}
    raw = json.dumps(body, separators=(",", ":")).encode()  # as sent: the receiver keeps it parsed
    standardwebhooks.Webhook(client["secret"]).verify(raw, event["headers"])
    rows = live.manage(
        "shell",
        "-c",
        "from clients.models import Delivery; from iam.models import AuditEntry; "
        "from accounts.models import Account; "
        f"d = Delivery.objects.get(client_id='{client['id']}'); "
        "print(d.event_type, d.status, d.attempt_rows.count(), "
        f"AuditEntry.objects.filter(action='client.send_test_event', resource_id='{client['id']}').count(), "
        f"Account.objects.get(email='{OPERATOR_EMAIL}').last_login is not None)",
    )
    assert rows.stdout.strip().splitlines()[-1].split() == ["client.test", "delivered", "1", "1", "True"], (
        rows.stdout + rows.stderr
    )
