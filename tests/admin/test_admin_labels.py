"""The admin reads as words: every label it shows (model names, list columns, filters, form and
read-only fields, inlines) writes an acronym as one (`SSO connections`, `MFA required`, `IP address`),
never as a capitalised word (`Sso`, `Mfa`, `Ip`); the workspace page links to the workspace's members,
clients, SSO connections and SCIM tokens; the audit list shows which record each entry changed."""

import re
import uuid

import pytest
from django.contrib import admin
from django.contrib.admin.utils import label_for_field
from django.test import RequestFactory
from django.urls import reverse
from django.utils.text import capfirst

from authn.models import Session
from authn.sessions import issue_session
from iam.platform import audit
from rbac.models import Membership
from scim.services import create_token
from sso.models import SsoConnection
from tests.factories import AccountFactory, ClientFactory, MembershipFactory, RoleFactory, WorkspaceFactory

ACRONYMS = {
    word.lower(): word
    for word in (
        "AMR",
        "API",
        "DNS",
        "HTTP",
        "ID",
        "IP",
        "JSON",
        "JWKS",
        "JWT",
        "MFA",
        "OAuth",
        "OIDC",
        "SCIM",
        "SMTP",
        "SSO",
        "TOTP",
        "TXT",
        "URI",
        "URL",
        "UUID",
    )
}


def raw_acronyms(label: str) -> list[str]:
    """The words of `label` that are an acronym written otherwise (`Sso`, `id`), and "O auth", the name
    Django makes of `OAuthState`."""
    found = [word for word in re.findall(r"[A-Za-z]+", label) if ACRONYMS.get(word.lower(), word) != word]
    return found + (["O auth"] if "o auth" in label.lower() else [])


def shown_labels(model_admin, request) -> list[tuple[str, str]]:
    """(where, label) of what the admin of one model shows, capitalised as the admin renders it."""
    model = model_admin.model
    found = [("model", model._meta.verbose_name), ("models", model._meta.verbose_name_plural)]
    names = [("column", name) for name in model_admin.get_list_display(request)]
    names += [("filter", name) for name in model_admin.get_list_filter(request) if isinstance(name, str)]
    names += [("read-only field", name) for name in model_admin.get_readonly_fields(request, None)]
    found += [(f"{kind} {name}", label_for_field(name, model, model_admin)) for kind, name in names]
    form = model_admin.get_form(request, None)  # the add form's fields, as labelled there
    found += [(f"field {name}", field.label or name) for name, field in form.base_fields.items()]
    for inline in model_admin.get_inline_instances(request, None):
        found.append((f"inline {type(inline).__name__}", inline.verbose_name_plural))
        found += [
            (f"inline field {name}", label_for_field(name, inline.model, inline))
            for name in inline.get_fields(request, None)
        ]
    return [(where, capfirst(str(label))) for where, label in found]


def test_the_acronym_check_catches_what_django_makes_of_field_names():
    assert raw_acronyms("Sso connections") == ["Sso"]
    assert raw_acronyms("Mfa required") == ["Mfa"]
    assert raw_acronyms("Actor id") == ["id"]
    assert raw_acronyms("O auth state") == ["O auth"]
    assert raw_acronyms("SSO connections") == raw_acronyms("IP address") == raw_acronyms("Identity") == []


def test_no_admin_label_shows_a_raw_acronym(operator):
    request = RequestFactory().get("/admin/")
    request.user = operator
    wrong = [
        f"{model._meta.label} {where}: {label!r}"
        for model, model_admin in admin.site._registry.items()
        for where, label in shown_labels(model_admin, request)
        if raw_acronyms(label)
    ]
    assert wrong == []


def test_the_index_names_the_models_in_words(admin_web):
    html = admin_web.get(reverse("admin:index")).content.decode()
    for name in ("SSO connections", "SSO domains", "SCIM tokens", "SCIM requests", "Audit entries"):
        assert f">{name}<" in html
    assert not re.search(r">(Sso|Scim)\b", html)


def test_the_workspace_form_says_mfa_required(admin_web):
    workspace = WorkspaceFactory()
    html = admin_web.get(reverse("admin:tenancy_workspace_change", args=[workspace.pk])).content.decode()
    assert ">MFA required<" in html and "Mfa" not in html


# The workspace page's links


@pytest.fixture
def acme_and_globex(db):
    """Acme with two members, a client, an SSO connection and a SCIM token; Globex with one of each."""
    made = {}
    for slug, members in (("acme", 2), ("globex", 1)):
        workspace = WorkspaceFactory(slug=slug)
        owner = RoleFactory(workspace=workspace, permissions=["*"])
        for _ in range(members):
            MembershipFactory(workspace=workspace, roles=[owner])
        ClientFactory(workspace=workspace)
        SsoConnection.objects.create(
            workspace=workspace,
            name=f"{slug} idp",
            issuer="https://idp.example.com",
            client_id="c",
            client_secret_encrypted="x",
            authorization_endpoint="https://idp.example.com/a",
            token_endpoint="https://idp.example.com/t",
            jwks_uri="https://idp.example.com/j",
        )
        create_token(workspace, name=f"{slug} directory", actor=None)
        made[slug] = workspace
    return made["acme"], made["globex"]


LISTS = {
    "Members": ("admin:rbac_membership_changelist", 2),
    "Clients": ("admin:clients_client_changelist", 1),
    "SSO connections": ("admin:sso_ssoconnection_changelist", 1),
    "SCIM tokens": ("admin:scim_scimtoken_changelist", 1),
}


def test_the_workspace_page_links_to_its_members_clients_sso_connections_and_scim_tokens(
    admin_web, acme_and_globex
):
    acme, globex = acme_and_globex
    html = admin_web.get(reverse("admin:tenancy_workspace_change", args=[acme.pk])).content.decode()
    for label, (changelist, count) in LISTS.items():
        url = f"{reverse(changelist)}?workspace__id__exact={acme.pk}"
        assert f'<a href="{url}">{label} ({count})</a>' in html
        listed = admin_web.get(url)
        assert listed.status_code == 200
        rows = list(listed.context["cl"].result_list)
        assert len(rows) == count and {row.workspace_id for row in rows} == {acme.pk}  # not Globex's
    assert Membership.objects.filter(workspace=globex).count() == 1


# The audit list: which record changed


def test_the_audit_list_shows_the_record_changed_by_title_and_id(admin_web, acme_and_globex):
    acme, _ = acme_and_globex
    connection = SsoConnection.objects.get(workspace=acme)
    account = AccountFactory(email="sam@example.com")
    issue_session(account, amr=["pwd"])
    session = Session.objects.get(account=account).pk
    gone, unnamed = uuid.uuid4(), uuid.uuid4()
    audit.record("ssoconnection.update", resource=("ssoconnection", connection.pk), workspace_id=acme.pk)
    audit.record("session.revoke", resource=("session", session))
    audit.record("client.delete", resource=("client", gone), workspace_id=acme.pk)
    audit.record("thing.update", resource=("thing", unnamed))
    html = admin_web.get(reverse("admin:iam_auditentry_changelist")).content.decode()

    for url, title, pk in (
        (reverse("admin:sso_ssoconnection_change", args=[connection.pk]), "acme idp", connection.pk),
        (reverse("admin:authn_session_change", args=[session]), "session of sam@example.com", session),
    ):
        assert f'<a href="{url}">{title}</a><br><small>{pk}</small>' in html
    assert f"{gone} (gone)" in html and f"{gone} (gone)<br>" not in html
    assert f'<td class="field-resource_shown">{unnamed}</td>' in html
    assert ">ssoconnection<" in html and ">session<" in html  # the resource type column
