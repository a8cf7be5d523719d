"""Every write to applications and consents (docs/oidc.md#applications): the API, the admin and the hosted
pages call these. The protocol's own writes (codes, application sessions) are in oidc/sessions.py."""

import secrets
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, account_of
from authn.models import Session
from authn.sessions import end_session
from iam.http.errors import ApiError
from iam.platform import audit, crypto
from iam.platform.service_helpers import UNSET, apply_changes, sent
from rbac.models import ServiceAccount
from tenancy.models import Workspace
from tenancy.quotas import check_quota

from . import redirect_uris
from .application_cache import forget_application
from .models import Application, AuthorizationCode, Consent

AUDITED = ("name", "type", "redirect_uris", "post_logout_redirect_uris", "grant_types", "tags")
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials")
DEFAULT_GRANT_TYPES = ["authorization_code", "refresh_token"]
ONLY_WEB_HAS_A_SECRET = "only web applications have a secret"


def _check_uris(uris: list[str], *, field: str, application_type: str) -> None:
    for uri in uris:
        try:
            redirect_uris.check(uri, application_type=application_type)
        except redirect_uris.Refused as exc:
            raise ApiError(400, f"redirect_uri not allowed: {exc}", field) from exc


def _check_grants(
    application_type: str,
    *,
    workspace_id: UUID,
    grant_types: list[str],
    redirect: list[str],
    service_account_id: UUID | None,
) -> None:
    """docs/api.md#applications: `client_credentials` is for `web` applications, which then name the service
    account of their own workspace it acts as (docs/oidc.md#client-credentials); every other grant needs a
    redirect URI."""
    if "client_credentials" in grant_types:
        if application_type != Application.Type.WEB:
            raise ApiError(400, "client_credentials is for web applications", "grant_types")
        if service_account_id is None:
            raise ApiError(400, "service_account_id required", "service_account_id")
        if not ServiceAccount.objects.filter(pk=service_account_id, workspace_id=workspace_id).exists():
            raise ApiError(400, "service account not found", "service_account_id")
    if not redirect and set(grant_types) != {"client_credentials"}:
        raise ApiError(400, "redirect_uris required", "redirect_uris")


def _new_secret(application: Application) -> str:
    """43 base64url characters (256 bits), kept as a keyed digest only (docs/oidc.md#applications)."""
    secret = secrets.token_urlsafe(32)
    application.secret_digest = crypto.digest(secret)
    return secret


def create_application(
    workspace: Workspace,
    *,
    actor: Account | None,
    name: str,
    type: str,
    redirect_uris: list[str],
    tags: list[str],
    meta: dict[str, Any],
    post_logout_redirect_uris: list[str] | None = None,
    grant_types: list[str] | None = None,
    service_account_id: UUID | None = None,
) -> tuple[Application, str | None]:
    """The application and, for a `web` one, its plaintext secret, shown this once."""
    post_logout_redirect_uris = post_logout_redirect_uris or []
    grant_types = grant_types or list(DEFAULT_GRANT_TYPES)
    _check_uris(redirect_uris, field="redirect_uris", application_type=type)
    _check_uris(post_logout_redirect_uris, field="post_logout_redirect_uris", application_type=type)
    _check_grants(
        type,
        workspace_id=workspace.pk,
        grant_types=grant_types,
        redirect=redirect_uris,
        service_account_id=service_account_id,
    )
    with transaction.atomic():
        check_quota(
            "applications",
            settings.IAM_QUOTA_APPLICATIONS,
            actor=actor,
            records=Application.objects.in_workspace(workspace),
            owner=workspace,
        )
        application = Application(
            workspace=workspace,
            name=name,
            type=type,
            redirect_uris=redirect_uris,
            post_logout_redirect_uris=post_logout_redirect_uris,
            grant_types=grant_types,
            # only a client_credentials application acts as a service account
            service_account_id=service_account_id if "client_credentials" in grant_types else None,
            first_party=workspace.slug == settings.IAM_ROOT_WORKSPACE,
            created_by=account_of(actor),
            tags=tags,
            meta=meta,
        )
        secret = _new_secret(application) if application.confidential else None
        application.save(force_insert=True)
        audit.record(
            "application.create",
            resource=("application", application.pk),
            workspace_id=workspace.pk,
            changes=audit.created(application, AUDITED),
            actor=actor,
        )
    return application, secret


def update_application(
    application: Application,
    *,
    actor: Account | None,
    name: str = UNSET,
    redirect_uris: list[str] = UNSET,
    post_logout_redirect_uris: list[str] = UNSET,
    grant_types: list[str] = UNSET,
    service_account_id: UUID | None = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
) -> Application:
    """Only what is sent changes; the type and the secret stay (`regenerate_secret` replaces it)."""
    changes = sent(
        name=name,
        redirect_uris=redirect_uris,
        post_logout_redirect_uris=post_logout_redirect_uris,
        grant_types=grant_types,
        service_account_id=service_account_id,
        tags=tags,
        meta=meta,
    )
    kind = application.type
    _check_uris(changes.get("redirect_uris", []), field="redirect_uris", application_type=kind)
    _check_uris(
        changes.get("post_logout_redirect_uris", []), field="post_logout_redirect_uris", application_type=kind
    )
    grant_types = changes.get("grant_types", application.grant_types)
    _check_grants(
        kind,
        workspace_id=application.workspace_id,
        grant_types=grant_types,
        redirect=changes.get("redirect_uris", application.redirect_uris),
        service_account_id=changes.get("service_account_id", application.service_account_id),
    )
    if "client_credentials" not in grant_types and "service_account_id" in changes:
        changes["service_account_id"] = None  # only a client_credentials application acts as one
    with transaction.atomic():
        entry = audit.diff(application, changes, AUDITED)
        fields = apply_changes(application, changes)
        application.save(update_fields=fields)
        forget_application(application.pk)
        if entry:
            audit.record(
                "application.update",
                resource=("application", application.pk),
                workspace_id=application.workspace_id,
                changes=entry,
                actor=actor,
            )
    return application


def _end_application_sessions(sessions, *, actor: Account | None) -> None:
    for session in sessions.filter(revoked_at__isnull=True).select_for_update():
        end_session(session, actor=actor)


def delete_application(application: Application, *, actor: Account | None) -> dict:
    """The application's tokens stop at once (its sessions end); its consents and codes go with it."""
    summary = {"id": str(application.pk)}
    with transaction.atomic():
        audit.record(
            "application.delete",
            resource=("application", application.pk),
            workspace_id=application.workspace_id,
            changes=audit.removed(application, ("name", "type")),
            actor=actor,
        )
        _end_application_sessions(Session.objects.filter(application_id=application.pk), actor=actor)
        forget_application(application.pk)
        application.delete()
    return summary


def regenerate_secret(application: Application, *, actor: Account | None) -> str:
    """A `web` application's new secret; the old one stops when this commits."""
    if not application.confidential:
        raise ApiError(400, ONLY_WEB_HAS_A_SECRET, "id")
    with transaction.atomic():
        secret = _new_secret(application)
        fields = apply_changes(application, {})
        application.save(update_fields=["secret_digest", *fields])
        forget_application(application.pk)
        audit.record(
            "application.secret_regenerate",
            resource=("application", application.pk),
            workspace_id=application.workspace_id,
            actor=actor,
        )
    return secret


# Consents (docs/oidc.md#applications)


def consent_covers(account: Account, application: Application, scopes: list[str]) -> bool:
    """Whether the account already granted the application every scope asked."""
    consent = Consent.objects.filter(account=account, application=application).first()
    return consent is not None and set(scopes) <= set(consent.scopes)


def grant_consent(account: Account, application: Application, *, scopes: list[str]) -> Consent:
    """Remembers the scopes granted, added to those granted before. Recorded in the application's
    workspace's log: the account let that workspace's application in."""
    with transaction.atomic():
        consent, created = Consent.objects.select_for_update().get_or_create(
            account=account, application=application, defaults={"scopes": sorted(set(scopes))}
        )
        before = list(consent.scopes)
        if not created:
            consent.scopes = sorted(set(before) | set(scopes))
            consent.updated_at = timezone.now()
            consent.save(update_fields=["scopes", "updated_at"])
        if created or consent.scopes != before:
            audit.record(
                "consent.grant",
                resource=("consent", consent.pk),
                workspace_id=application.workspace_id,
                changes={
                    "application_id": str(application.pk),
                    "scopes": {"before": [] if created else before, "after": consent.scopes},
                },
                actor=account,
            )
    return consent


def consents_of(account: Account) -> list[Consent]:
    """The applications an account let in (its `/account` page lists them)."""
    return list(
        Consent.objects.filter(account=account)
        .select_related("application__workspace")
        .order_by("created_at")
    )


def revoke_consent(consent: Consent, *, actor: Account | None) -> None:
    """The account takes its consent back: the application's sessions of that account end with it, so
    its tokens stop at once, its codes not yet exchanged go, and the next sign-in asks again."""
    with transaction.atomic():
        sessions = Session.objects.filter(
            account_id=consent.account_id, application_id=consent.application_id
        )
        _end_application_sessions(sessions, actor=actor)
        AuthorizationCode.objects.filter(
            application_id=consent.application_id,
            browser_session__account_id=consent.account_id,
            used_at__isnull=True,
        ).delete()
        audit.record(
            "consent.revoke",
            resource=("consent", consent.pk),
            workspace_id=consent.application.workspace_id,
            changes={"application_id": str(consent.application_id), "scopes": consent.scopes},
            actor=actor,
        )
        consent.delete()
