"""The OpenID Provider's records (docs/oidc.md): the applications that sign their users in here, the
consents people gave them, and the authorization codes between a sign-in and its exchange."""

import uuid

from django.db import models
from django.utils import timezone

from iam.platform import retention
from tenancy.models import InWorkspace, WorkspaceScopedQuerySet


class Application(InWorkspace):
    """A relying party (docs/oidc.md#applications). A `web` application is confidential: its secret is kept as
    a keyed digest only. `first_party`: it belongs to the root workspace, signs in any enabled account and
    asks no consent; any other application signs in only its workspace's active members, with their
    consent."""

    class Type(models.TextChoices):
        WEB = "web"
        SPA = "spa"
        NATIVE = "native"

    name = models.CharField(max_length=255)
    type = models.CharField(max_length=8, choices=Type.choices)
    redirect_uris = models.JSONField(default=list)
    post_logout_redirect_uris = models.JSONField(default=list, blank=True)
    grant_types = models.JSONField(default=list)
    # The service account of its workspace a `client_credentials` grant acts as
    # (docs/oidc.md#client-credentials): a plain id, checked where it is set and where a token is issued;
    # a deleted service account's application is refused tokens (`invalid_grant`).
    service_account_id = models.UUIDField("service account ID", null=True, blank=True)
    first_party = models.BooleanField(default=False, editable=False)
    secret_digest = models.CharField(max_length=64, blank=True, default="", editable=False)
    created_by = models.ForeignKey(
        "accounts.Account", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = WorkspaceScopedQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["workspace", "created_at", "id"], name="application_created")]

    def __str__(self) -> str:
        return self.name

    @property
    def client_id(self) -> str:
        return str(self.pk)

    @property
    def confidential(self) -> bool:
        return self.type == self.Type.WEB


class Consent(models.Model):
    """An account's consent to another workspace's application, with the scopes granted: asked once,
    remembered until the account revokes it (docs/oidc.md#applications)."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="consents")
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["account", "application"], name="consent_unique_account_app")
        ]

    def __str__(self) -> str:
        return f"consent of {self.account_id} to {self.application_id}"


class AuthorizationCode(models.Model):
    """One authorization code (RFC 6749 4.1.2): stored as a SHA-256 digest, bound to its application,
    redirect URI and PKCE challenge, valid 60 seconds and once. Spending it and starting the application
    session happen in one transaction, so a second use, in any process, finds the session to end
    (`session`). The row stays while that session may live (it goes with it)."""

    code_digest = models.CharField(max_length=64, primary_key=True)
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="+")
    browser_session = models.ForeignKey("authn.Session", on_delete=models.CASCADE, related_name="+")
    redirect_uri = models.TextField()
    scope = models.TextField()
    nonce = models.TextField(blank=True, default="")
    code_challenge = models.CharField(max_length=128)
    # The workspace chosen or named at sign-in (always the application's for another workspace's).
    workspace_id = models.UUIDField("workspace ID", null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)
    used_at = models.DateTimeField(null=True, blank=True)
    session = models.ForeignKey(
        "authn.Session", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )

    def __str__(self) -> str:
        return f"code {self.code_digest[:8]} for {self.application_id}"


@retention.sweep("authorization codes")
def sweep_codes(now, kept_since) -> int:
    """Codes never exchanged, once expired; a spent code goes with the session it started."""
    return AuthorizationCode.objects.filter(used_at__isnull=True, expires_at__lt=now).delete()[0]
