from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.db import models
from django.utils.crypto import salted_hmac

from iam.models import Resource


def normalize_email(email: str) -> str:
    # docs/api.md#validation: e-mails compare case-insensitively; storing them lower-cased lets a plain unique
    # index and plain equality serve every lookup.
    return email.strip().lower()


class AccountManager(BaseUserManager):
    def get_by_natural_key(self, email: str) -> "Account":
        return self.get(email=normalize_email(email))


class Account(Resource, AbstractBaseUser):
    email = models.EmailField(max_length=254, unique=True)
    name = models.CharField(max_length=255)
    description = models.TextField(null=True, blank=True)
    avatar_url = models.URLField("avatar URL", max_length=2048, null=True, blank=True)
    enabled = models.BooleanField(default=True)
    verified = models.BooleanField(default=False)
    is_superuser = models.BooleanField(
        "operator", default=False, help_text="Operators pass every permission check and use the admin."
    )
    # docs/security.md#tokens: bumped by revoke, password changes and refresh-token reuse; every token carries
    # it as `sv`, so incrementing it ends every session of the account at once.
    session_version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    updated_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    objects = AccountManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS = ["name"]

    class Meta:
        # A list's filter with the default order, or its sort, read from an index (docs/performance.md: 1M
        # accounts). `description` and `avatar_url` have none: their values may outgrow a btree entry.
        indexes = [
            models.Index(fields=["created_at", "id"], name="account_created"),
            models.Index(fields=["updated_at", "id"], name="account_updated"),
            models.Index(fields=["name", "id"], name="account_name"),
            models.Index(fields=["verified", "created_at", "id"], name="account_verified"),
            models.Index(fields=["enabled", "created_at", "id"], name="account_enabled"),
        ]

    def __str__(self) -> str:
        return self.email

    @property
    def is_active(self) -> bool:
        return self.enabled

    @property
    def is_staff(self) -> bool:
        return self.is_superuser

    def has_perm(self, perm: str, obj=None) -> bool:
        return self.enabled and self.is_superuser

    def has_module_perms(self, app_label: str) -> bool:
        return self.enabled and self.is_superuser

    def get_session_auth_hash(self) -> str:
        # Admin sessions end with the API's sessions: revocation and password changes bump the version.
        return salted_hmac(
            "accounts.Account.get_session_auth_hash",
            f"{self.password}:{self.session_version}",
            algorithm="sha256",
        ).hexdigest()


def account_of(actor: object) -> "Account | None":
    """The account a change is made by, for a `created_by` or `invited_by`: None when no account acts (a
    command, a directory, a workspace's service account, docs/api.md#service-accounts)."""
    return actor if isinstance(actor, Account) else None
