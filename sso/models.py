"""Enterprise SSO per workspace (docs/api.md#sso): a workspace's own OpenID Connect provider, and the e-mail
domains that route logins to it once proven."""

from django.db import models
from django.db.models import Q

from tenancy.models import InWorkspace, created_index


class SsoConnection(InWorkspace):
    """A workspace's OpenID Connect provider. The endpoints come from the issuer's discovery document,
    read at create and at every change of `issuer`; the client secret is stored encrypted
    (`IAM_ENCRYPTION_KEY`) and never answered."""

    name = models.CharField(max_length=255)
    issuer = models.CharField(max_length=2048)
    client_id = models.CharField("client ID", max_length=255)
    client_secret_encrypted = models.TextField(editable=False)
    enabled = models.BooleanField(default=True)
    # The provider's own second factor stands for the account's TOTP at a login through this connection.
    trust_provider_mfa = models.BooleanField("trust the provider's MFA", default=False, db_default=False)
    default_roles = models.ManyToManyField("rbac.Role", related_name="+", blank=True)
    authorization_endpoint = models.CharField(max_length=2048, editable=False)
    token_endpoint = models.CharField(max_length=2048, editable=False)
    userinfo_endpoint = models.CharField(max_length=2048, blank=True, default="", editable=False)
    jwks_uri = models.CharField("JWKS URI", max_length=2048, editable=False)
    token_auth_methods = models.JSONField(default=list, blank=True, editable=False)
    last_login_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(
        "accounts.Account", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = "SSO connection"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="sso_connection_unique_name")
        ]
        indexes = [created_index("sso_connection")]

    def __str__(self) -> str:
        return self.name

    @property
    def domains(self) -> list["SsoDomain"]:
        """Its domains: the rows a list prefetched (`iam.http.serializers.prefetch`), else a query."""
        rows = getattr(self, "prefetched_domain_rows", None)
        return list(self.domain_rows.all()) if rows is None else rows


class SsoDomain(models.Model):
    """An e-mail domain of a connection. It routes logins and links accounts only once verified (a DNS TXT
    record `_iam-verification.<domain>` holding `verification_token`, or an operator's word); verified,
    it belongs to its workspace alone (the partial unique constraint), and within a workspace one
    connection holds it."""

    connection = models.ForeignKey(SsoConnection, on_delete=models.CASCADE, related_name="domain_rows")
    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.CASCADE, related_name="+")
    domain = models.CharField(max_length=253)
    verification_token = models.CharField(max_length=64, editable=False)
    verified_at = models.DateTimeField(null=True, blank=True, editable=False)
    verified_by = models.CharField(max_length=16, blank=True, default="", editable=False)  # dns, operator
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "SSO domain"
        ordering = ["domain"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "domain"], name="sso_domain_unique_in_workspace"),
            models.UniqueConstraint(
                fields=["domain"], condition=Q(verified_at__isnull=False), name="sso_domain_verified_once"
            ),
        ]
        indexes = [models.Index(fields=["domain"], name="sso_domain")]

    def __str__(self) -> str:
        return self.domain

    @property
    def verified(self) -> bool:
        return self.verified_at is not None
