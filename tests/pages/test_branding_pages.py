"""A workspace's branding on the pages shown for it (docs/pages.md#branding): its invitation, its
application's sign-in and consent show its display name, logo and colour; the colour is a stylesheet of
the service's own (no inline style: the CSP stays `default-src 'self'`), darkened when too pale to read;
another workspace's pages, and the service's own, keep theirs."""

import re
from urllib.parse import urlencode

import pytest
from django.core import mail

from iam.http.pages import PAGE_BACKGROUND, WHITE, contrast
from tests.factories import (
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    RoleFactory,
    WorkspaceFactory,
)
from tests.oidc.conftest import authorize, make_app
from tests.oidc.conftest import sign_in as browser_signed_in

from .helpers import CSP, text
from .test_email_link_pages import link_of, send_outbox

ACME = {
    "display_name": "Acme Cloud",
    "logo_url": "https://cdn.acme.example/logo.png",
    "primary_color": "#1a6fd0",
}


@pytest.fixture
def acme(db):
    return WorkspaceFactory(name="acme-internal", slug="acme", branding=ACME)


@pytest.fixture
def globex(db):
    return WorkspaceFactory(name="Globex", slug="globex", branding={"primary_color": "#ff0000"})


def header(html: str) -> str:
    return re.search(r'<header class="site-header">(.*?)</header>', html, re.S).group(1)


def accent_links(html: str) -> list[str]:
    return re.findall(r'<link rel="stylesheet" href="(/pages/accent/[^"]+)">', html)


def invitation_page(client, workspace, member_of, email="invitee@example.com"):
    _, owner_api = member_of(workspace, "*")
    role = RoleFactory(workspace=workspace, name="Viewer")
    owner_api.call("/invitations/create", {"email": email, "scope": "workspace", "role_ids": [str(role.pk)]})
    send_outbox()
    (message,) = [m for m in mail.outbox if m.to == [email]]
    return client.get(link_of(message))


def test_the_invitation_page_wears_its_workspaces_branding(browser, acme, globex, member_of, root):
    page = invitation_page(browser, acme, member_of)
    html = text(page)
    assert page.status_code == 200
    assert "Acme Cloud" in header(html) and "acme-internal" not in header(html)
    assert '<img class="brand-logo" src="https://cdn.acme.example/logo.png"' in header(html)
    assert accent_links(html) == ["/pages/accent/1a6fd0.css"]
    assert "<title>Invitation · Acme Cloud</title>" in html
    assert "style=" not in html and "<style" not in html  # the CSP allows no inline style
    assert page["Content-Security-Policy"] == CSP
    # the link's token stays on this origin: a logo from elsewhere gets no Referer with it
    assert page["Referrer-Policy"] == "same-origin"
    other = invitation_page(browser, globex, member_of, email="someone@example.com")
    assert "Globex" in header(text(other)) and "Acme" not in text(other)
    assert accent_links(text(other)) == ["/pages/accent/ff0000.css"]


def test_pages_of_no_workspace_keep_the_services_look(browser, acme):
    for path in ("/signin", "/signup", "/forgot-password"):
        html = text(browser.get(path))
        assert accent_links(html) == [] and "brand-logo" not in html
        assert '<span class="brand-name">IAM</span>' in html


def test_an_unbranded_workspace_shows_its_name(browser, member_of, root):
    plain = WorkspaceFactory(name="Plain Co", slug="plain")
    html = text(invitation_page(browser, plain, member_of))
    assert '<span class="brand-name">Plain Co</span>' in html and accent_links(html) == []


def test_the_accent_stylesheet(client):
    answer = client.get("/pages/accent/1a6fd0.css")
    assert answer.status_code == 200 and answer["Content-Type"] == "text/css; charset=utf-8"
    assert "--accent: #1a6fd0;" in answer.content.decode()
    assert "immutable" in answer["Cache-Control"]
    for bad in ("1A6FD0", "fff", "zzzzzz", "1a6fd0;x", "1a6fd00"):
        assert client.get(f"/pages/accent/{bad}.css").status_code == 404


@pytest.mark.parametrize("color", ["ffffff", "ffd700", "00ff00", "7fb2ff", "000000", "2449c4"])
def test_a_pale_colour_is_darkened_until_it_reads(client, color):
    css = client.get(f"/pages/accent/{color}.css").content.decode()
    accent = re.search(r"--accent: #([0-9a-f]{6});", css).group(1)
    rgb = tuple(int(accent[i : i + 2], 16) for i in (0, 2, 4))
    assert contrast(rgb, WHITE) >= 4.5 and contrast(rgb, PAGE_BACKGROUND) >= 4.5
    original = tuple(int(color[i : i + 2], 16) for i in (0, 2, 4))
    if contrast(original, PAGE_BACKGROUND) >= 4.5:
        assert accent == color  # a colour that reads is kept as it is


def test_another_workspaces_application_signs_in_and_asks_consent_in_its_look(browser, acme, root):
    crm = make_app(acme, "Acme CRM")
    portal = make_app(root, "Portal")
    _, answer = authorize(browser, crm)
    signin = answer["Location"]
    assert signin.startswith("/signin?")
    html = text(browser.get(signin))
    assert "Acme Cloud" in header(html) and accent_links(html) == ["/pages/accent/1a6fd0.css"]
    password_step = text(browser.post(signin, {"email": "alice@example.com"}))
    assert "Acme Cloud" in header(password_step)
    _, first_party = authorize(browser, portal)
    assert accent_links(text(browser.get(first_party["Location"]))) == []  # the service's own
    forged = "/signin?" + urlencode({"next": "/oauth2/authorize?client_id=not-a-uuid"})
    assert accent_links(text(browser.get(forged))) == []

    alice = AccountFactory(email="alice@example.com")
    CredentialFactory(account=alice)
    MembershipFactory(account=alice, workspace=acme, roles=[RoleFactory(workspace=acme)])
    browser_signed_in(browser, alice)
    _, consent = authorize(browser, crm)
    html = text(consent)
    assert consent.status_code == 200 and "Allow" in html
    assert "Acme Cloud" in header(html) and accent_links(html) == ["/pages/accent/1a6fd0.css"]
