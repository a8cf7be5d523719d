"""Enterprise SSO per workspace (docs/api.md#sso): a workspace's own OpenID Connect provider or SAML 2.0
identity provider (docs/saml.md), and the e-mail domains that route logins to it once proven."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from iam.platform import retention
from tenancy.models import InWorkspace, created_index


class SsoConnection(InWorkspace):
    """A workspace's identity provider. OpenID Connect (`oidc`): the endpoints come from the issuer's
    discovery document, read at create and at every change of `issuer`; the client secret is stored
    encrypted (`IAM_ENCRYPTION_KEY`) and never answered. SAML 2.0 (`saml`): what the IdP's metadata
    document names (its entity id, its HTTP-Redirect single sign-on URL, its signing certificates), read
    at create and at every new document; the OpenID fields stay empty."""

    class Protocol(models.TextChoices):
        OIDC = "oidc"
        SAML = "saml"

    name = models.CharField(max_length=255)
    protocol = models.CharField(
        max_length=8, choices=Protocol.choices, default=Protocol.OIDC, db_default=Protocol.OIDC
    )
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
    # SAML: the IdP's metadata as given, and what the service reads of it (sso/saml.py). Database
    # defaults: a process of the release before still inserts OpenID connections during a deploy.
    idp_metadata_xml = models.TextField(
        "IdP metadata XML", blank=True, default="", db_default="", editable=False
    )
    idp_entity_id = models.CharField(
        "IdP entity ID", max_length=1024, blank=True, default="", db_default="", editable=False
    )
    idp_sso_url = models.CharField(
        "IdP single sign-on URL", max_length=2048, blank=True, default="", db_default="", editable=False
    )
    idp_certificates = models.JSONField(  # base64 DER, as the metadata has them
        "IdP signing certificates",
        default=list,
        db_default=models.Value([], models.JSONField()),
        blank=True,
        editable=False,
    )
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

    # The service's side of a SAML connection (docs/saml.md#the-values-to-copy): its metadata's URL is
    # its entity id.

    @property
    def metadata_url(self) -> str:
        return f"{settings.IAM_PUBLIC_URL}/saml/{self.pk}/metadata"

    @property
    def sp_entity_id(self) -> str:
        return self.metadata_url

    @property
    def acs_url(self) -> str:
        return f"{settings.IAM_PUBLIC_URL}/saml/{self.pk}/acs"

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


class SamlAssertion(models.Model):
    """An assertion a SAML connection's login accepted, kept until it expires so that it is never accepted
    again (docs/saml.md#the-checks): the unique constraint decides across every process. Only a digest of
    its id is kept."""

    connection = models.ForeignKey(SsoConnection, on_delete=models.CASCADE, related_name="+")
    assertion_digest = models.CharField(max_length=64)
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "SAML assertion"
        constraints = [
            models.UniqueConstraint(fields=["connection", "assertion_digest"], name="saml_assertion_once")
        ]

    def __str__(self) -> str:
        return f"assertion {self.assertion_digest[:8]}"


@retention.sweep("saml assertions")
def sweep_saml_assertions(now, kept_since) -> int:
    """An expired assertion is refused by its time conditions: its row is no longer needed."""
    return SamlAssertion.objects.filter(expires_at__lt=now).delete()[0]
