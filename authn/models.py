import uuid

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from iam.platform import retention
from tenancy.models import AccountInWorkspace, created_index

USER_AGENT_MAX = 512  # characters kept of a client's User-Agent header


class Credential(AccountInWorkspace):
    """Links an account to an authentication method (docs/api.md#credentials). The password hash itself is
    Django's `Account.password`; this row says whether password login is usable (`revoked` stops it) and when
    it was last used."""

    class Kind(models.TextChoices):
        PASSWORD = "password"
        OAUTH = "oauth"
        SSO = "sso"
        API_KEY = "api_key"

    class Provider(models.TextChoices):
        LOCAL = "local"
        IDP_A = "idp_a"
        IDP_B = "idp_b"

    class Status(models.TextChoices):
        ACTIVE = "active"
        REVOKED = "revoked"
        PENDING = "pending"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    provider = models.CharField(max_length=16, choices=Provider.choices)
    status = models.CharField(max_length=16, choices=Status.choices)
    provider_id = models.CharField("provider ID", max_length=255, null=True, blank=True)
    email = models.EmailField(max_length=254, null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "provider_id"],
                condition=Q(provider_id__isnull=False),
                name="credential_unique_provider_id",
            ),
            models.UniqueConstraint(
                fields=["account"], condition=Q(kind="password"), name="credential_one_password"
            ),
        ]
        indexes = [
            created_index("credential"),
            models.Index(fields=["account", "kind"], name="credential_account"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}/{self.provider} of {self.account_id}"


class SessionQuerySet(models.QuerySet):
    def live(self, now=None) -> "SessionQuerySet":
        """Sessions whose tokens still work: not revoked, not expired, and not ended by a later bump of the
        account's session version (`auth/revoke`, a new password, a disable)."""
        return self.filter(
            revoked_at__isnull=True,
            expires_at__gt=now or timezone.now(),
            session_version=F("account__session_version"),
        )


class Session(models.Model):
    """One login (docs/api.md#sessions): every token of it carries its id (`sid`) and how the account proved
    itself (`amr`). A session lives while it is not revoked, not expired (`IAM_REFRESH_TOKEN_DAYS` after the
    login) and of the account's current session version; `auth/revoke` with `except_current` moves the
    caller's session to the new version, so only it survives the bump.

    A `browser` session is the hosted pages' sign-in (docs/pages.md#the-browser-session): no token of its
    own, but the `iam_session` cookie, of whose secret only a digest is kept (`secret_digest`)."""

    class Kind(models.TextChoices):
        API = "api"  # its tokens were answered to whoever signed in (`auth/login`, a callback, ...)
        BROWSER = "browser"  # the hosted pages' cookie (authn/browser.py)

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.API, editable=False)
    secret_digest = models.CharField(max_length=64, blank=True, default="", editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)
    ip = models.GenericIPAddressField("IP address", null=True, blank=True)
    user_agent = models.CharField(max_length=USER_AGENT_MAX, blank=True, default="")
    amr = models.JSONField("authentication methods (AMR)", default=list)
    # The workspace whose own SSO connection the login came through (its MFA policy is then met); a plain
    # id, not a relation: the session outlives nothing by it, and a deleted workspace's id matches nothing.
    sso_workspace_id = models.UUIDField("SSO workspace ID", null=True, blank=True, editable=False)
    session_version = models.PositiveIntegerField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    # A session an application's code exchange started (docs/security.md#application-sessions): the
    # application (a plain id, `oidc` sits above this app) and the browser session it came from, whose
    # end ends it too.
    application_id = models.UUIDField("application ID", null=True, blank=True, editable=False)
    browser_session = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="application_sessions",
        editable=False,
    )

    objects = SessionQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["account", "created_at", "id"], name="session_account_created"),
            # an application's sessions, ended when it is deleted (oidc.services.delete_application)
            models.Index(
                fields=["application_id"],
                condition=Q(application_id__isnull=False),
                name="session_application",
            ),
        ]

    def __str__(self) -> str:
        return f"session {self.pk} of {self.account_id}"

    def is_live(self, account, now=None) -> bool:
        """What `SessionQuerySet.live` selects, for a row read with its account."""
        return (
            self.revoked_at is None
            and self.expires_at > (now or timezone.now())
            and self.session_version == account.session_version
        )

    @property
    def auth_time(self) -> int:
        """When the login that started this session happened, as its tokens carry it
        (docs/security.md#tokens). An application session's tokens carry its browser session's instead."""
        return int(self.created_at.timestamp())


class RefreshToken(models.Model):
    """One row per issued refresh token: rotation marks it used, and a used one presented again is reuse
    (RFC 9700 4.14), which ends every session of the account."""

    jti = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return str(self.jti)


class Totp(models.Model):
    """An account's TOTP second factor (docs/api.md#second-factor-totp): pending until a first code confirms
    it. The secret is encrypted at rest like client secrets; `last_used_step` is the time step of the last
    code accepted, so no code works twice."""

    account = models.OneToOneField(
        "accounts.Account", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    secret_encrypted = models.TextField(editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    last_used_step = models.BigIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"totp of {self.account_id}"


class RecoveryCode(models.Model):
    """One single-use recovery code of an account's TOTP, stored as an HMAC digest only."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    digest = models.CharField(max_length=64)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["account", "digest"], name="recovery_code_account")]

    def __str__(self) -> str:
        return f"recovery code {self.pk} of {self.account_id}"


class MfaChallenge(models.Model):
    """An `mfa_token` handed out after a first factor: spent by the one `auth/mfa/verify` that
    completes it."""

    jti = models.UUIDField(primary_key=True)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    expires_at = models.DateTimeField(db_index=True)
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return str(self.jti)


class Passkey(models.Model):
    """A WebAuthn credential of an account (docs/api.md#passkeys): a first factor that verified the user
    on its own, and a second factor after a password. `credential_id` is the authenticator's id of it
    (base64url, as browsers write it), `public_key` its COSE key; `sign_count` the last signature counter
    seen, which must grow (a counter going backwards suggests a cloned authenticator); `backed_up` the
    authenticator's backup-state flag (a synced passkey)."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    credential_id = models.CharField("credential ID", max_length=1400, unique=True, editable=False)
    public_key = models.BinaryField(editable=False)
    sign_count = models.PositiveBigIntegerField(default=0, editable=False)
    name = models.CharField(max_length=100)
    backed_up = models.BooleanField(default=False, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        indexes = [models.Index(fields=["account", "created_at", "id"], name="passkey_account_created")]

    def __str__(self) -> str:
        return f"passkey {self.name} of {self.account_id}"


class PasskeyChallenge(models.Model):
    """One WebAuthn challenge handed out (docs/security.md#passkeys): a digest of it, the ceremony it is
    for and whom it is bound to; spent by the one verification that presents it, within 5 minutes."""

    class Purpose(models.TextChoices):
        REGISTER = "register"  # bound to the account and the session that asked
        LOGIN = "login"  # a discoverable sign-in: anyone's passkey, by the page's browser when it asked
        MFA = "mfa"  # bound to one `mfa_token` (its jti) and its account, or the admin sign-in's step
        STEP_UP = "step_up"  # bound to the account and the browser session that steps up

    digest = models.CharField(max_length=64, primary_key=True)
    purpose = models.CharField(max_length=16, choices=Purpose.choices)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, null=True, related_name="+")
    session_id = models.UUIDField("session ID", null=True, blank=True)
    mfa_jti = models.UUIDField("mfa_token ID", null=True, blank=True)
    expires_at = models.DateTimeField(db_index=True)
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.purpose} challenge {self.digest[:8]}"


class OAuthState(models.Model):
    """The server-side half of one OAuth login (docs/api.md#oauth-login): kept 10 minutes, used once
    (docs/api.md#oauth-login). Only a SHA-256 digest of the state is stored, and the PKCE code_verifier is
    encrypted at rest."""

    state_digest = models.CharField(max_length=64, unique=True)
    provider = models.CharField(max_length=16, choices=Credential.Provider.choices)
    redirect_url = models.CharField(max_length=2048)
    code_verifier = models.TextField()
    # An OpenID Connect login (an SSO connection's, docs/api.md#sso) also binds the ID token to this login
    # with a nonce (encrypted like the verifier) and names the connection (no foreign key: `sso` sits
    # above this app).
    nonce = models.TextField(blank=True, default="")
    connection_id = models.UUIDField(null=True, blank=True)
    # A login the hosted sign-in page started (home-realm discovery): the callback starts the browser
    # session and goes on to this path of the service, with no token in any URL (docs/pages.md).
    signin_next = models.CharField(max_length=2048, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.provider} state {self.state_digest[:8]}"


class SigningKey(models.Model):
    """A key pair that signs tokens: the RS256 key the service always has, and IAM_JWT_ALGORITHM's when it
    is asymmetric (EdDSA or ES256); one current (not retired) key per algorithm. The private key is stored
    encrypted with `IAM_ENCRYPTION_KEY`; the public key is published in the JWKS document while tokens it
    signed may still be alive: until `IAM_REFRESH_TOKEN_DAYS` after it was retired. HS256 keys never live
    here (the setting `IAM_JWT_SIGNING_KEY`, docs/security.md#tokens)."""

    kid = models.CharField("key ID", max_length=64, primary_key=True)  # RFC 7638 thumbprint of the public key
    algorithm = models.CharField(max_length=16)
    public_key = models.TextField()  # PEM
    private_key_encrypted = models.TextField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["algorithm", "retired_at"], name="signing_key_current")]
        constraints = [
            # Two processes that create the first key at once end with one (authn/keys.py).
            models.UniqueConstraint(
                fields=["algorithm"],
                condition=models.Q(retired_at__isnull=True),
                name="signing_key_one_current",
            )
        ]

    def __str__(self) -> str:
        return f"{self.algorithm} {self.kid}"


@retention.sweep("refresh tokens")
def sweep_refresh_tokens(now, kept_since) -> int:
    """Used rows stay until they expire: reuse detection needs them."""
    return RefreshToken.objects.filter(expires_at__lt=now).delete()[0]


@retention.sweep("sessions")
def sweep_sessions(now, kept_since) -> int:
    """An expired session can no longer be refreshed nor listed: its row goes."""
    return Session.objects.filter(expires_at__lt=now).delete()[0]


@retention.sweep("mfa challenges")
def sweep_mfa_challenges(now, kept_since) -> int:
    return MfaChallenge.objects.filter(expires_at__lt=now).delete()[0]


@retention.sweep("passkey challenges")
def sweep_passkey_challenges(now, kept_since) -> int:
    return PasskeyChallenge.objects.filter(expires_at__lt=now).delete()[0]


@retention.sweep("oauth states")
def sweep_oauth_states(now, kept_since) -> int:
    return OAuthState.objects.filter(expires_at__lt=now).delete()[0]
