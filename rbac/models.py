import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from tenancy.models import AccountInWorkspace, InWorkspace, created_index, unique_name_and_code


class Permission(InWorkspace):
    name = models.CharField(max_length=128)
    code = models.CharField(max_length=128, null=True, blank=True)
    description = models.TextField(null=True, blank=True)

    class Meta:
        constraints = unique_name_and_code("permission")
        indexes = [created_index("permission")]

    def __str__(self) -> str:
        return self.name


class Role(InWorkspace):
    name = models.CharField(max_length=255)
    description = models.TextField(null=True, blank=True)
    permissions = models.ManyToManyField(Permission, related_name="roles", blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="role_unique_name")]
        indexes = [created_index("role")]

    def __str__(self) -> str:
        return self.name


class Membership(AccountInWorkspace):
    class Scope(models.TextChoices):
        WORKSPACE = "workspace"
        PROJECT = "project"

    class Status(models.TextChoices):
        INVITED = "invited"
        ACTIVE = "active"
        SUSPENDED = "suspended"

    project = models.ForeignKey(
        "tenancy.Project", null=True, blank=True, on_delete=models.CASCADE, related_name="memberships"
    )
    scope = models.CharField(max_length=16, choices=Scope.choices)
    status = models.CharField(max_length=16, choices=Status.choices)
    roles = models.ManyToManyField(Role, related_name="memberships", blank=True)
    # docs/api.md#invitations: when the account consented (accepted the invitation, created the workspace, or
    # was added by an operator); null while it has not. Only a consented membership is ever `active`.
    accepted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "workspace"],
                condition=Q(scope="workspace"),
                name="membership_unique_workspace",
            ),
            models.UniqueConstraint(
                fields=["account", "project"], condition=Q(scope="project"), name="membership_unique_project"
            ),
            models.CheckConstraint(
                condition=Q(scope="workspace", project__isnull=True)
                | Q(scope="project", project__isnull=False),
                name="membership_scope_project",
            ),
        ]
        # Every list is within one workspace: its filters with the default order read from an index
        # (docs/performance.md: one workspace with 1M members).
        indexes = [
            created_index("membership"),
            models.Index(fields=["workspace", "updated_at", "id"], name="membership_updated"),
            models.Index(fields=["workspace", "status", "created_at", "id"], name="membership_status"),
            models.Index(fields=["workspace", "scope", "created_at", "id"], name="membership_scope"),
            models.Index(fields=["workspace", "project", "created_at", "id"], name="membership_project"),
            models.Index(fields=["account", "workspace", "status"], name="membership_account"),
        ]

    def __str__(self) -> str:
        """`alice@example.com in Acme (admin, owner)`; a project's membership names its project
        (`in Acme / Website`), one not active its status (`(editor; invited)`). Reads the account, the
        workspace, the project and the roles: a list selects and prefetches them."""
        place = self.workspace.name
        if self.project_id is not None:
            place = f"{place} / {self.project.name}"
        roles = [] if self._state.adding else sorted(role.name for role in self.roles.all())
        details = ", ".join(roles) or "no roles"
        if self.status != self.Status.ACTIVE:
            details = f"{details}; {self.status}"
        return f"{self.account.email} in {place} ({details})"


class Invitation(InWorkspace):
    """An invitation by e-mail address (docs/api.md#invitations): the tenant names an address, not
    an account, and learns nothing of whether one holds it. Accepting it makes (or activates) the
    membership it describes. `expired` is a `pending` invitation past `expires_at`; the status stored
    stays `pending` until something writes it (`Invitation.current_status` says what it is now)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        ACCEPTED = "accepted"
        DECLINED = "declined"
        REVOKED = "revoked"
        EXPIRED = "expired"

    email = models.EmailField(max_length=254)
    scope = models.CharField(max_length=16, choices=Membership.Scope.choices)
    project = models.ForeignKey(
        "tenancy.Project", null=True, blank=True, on_delete=models.CASCADE, related_name="invitations"
    )
    roles = models.ManyToManyField(Role, related_name="invitations", blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    invited_by = models.ForeignKey(
        "accounts.Account", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    membership = models.ForeignKey(
        Membership, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One pending invitation per address, workspace, scope and project (409 `invitation already
            # pending`); the check under the workspace lock answers first, these hold against anything else.
            models.UniqueConstraint(
                fields=["workspace", "email"],
                condition=Q(scope="workspace", status="pending"),
                name="invitation_unique_pending_workspace",
            ),
            models.UniqueConstraint(
                fields=["workspace", "email", "project"],
                condition=Q(scope="project", status="pending"),
                name="invitation_unique_pending_project",
            ),
            models.CheckConstraint(
                condition=Q(scope="workspace", project__isnull=True)
                | Q(scope="project", project__isnull=False),
                name="invitation_scope_project",
            ),
        ]
        indexes = [
            created_index("invitation"),
            models.Index(fields=["workspace", "status", "created_at", "id"], name="invitation_status"),
            models.Index(fields=["email", "status"], name="invitation_email"),
        ]

    def __str__(self) -> str:
        """`bob@example.com to Acme (pending)`. Reads the workspace: a list selects it."""
        return f"{self.email} to {self.workspace.name} ({self.current_status})"

    @property
    def current_status(self) -> str:
        if self.status == self.Status.PENDING and self.expires_at <= timezone.now():
            return self.Status.EXPIRED
        return self.status

    @property
    def is_open(self) -> bool:
        return self.current_status == self.Status.PENDING


class ServiceAccount(InWorkspace):
    """A machine identity of one workspace (docs/api.md#service-accounts): software that acts for no
    person, with roles of its workspace like a membership's (workspace scope, active while `enabled`) and
    API keys to authenticate with. It acts in its workspace only."""

    name = models.CharField(max_length=255)
    enabled = models.BooleanField(default=True)
    roles = models.ManyToManyField(Role, related_name="service_accounts", blank=True)
    # When one of its keys (or an application's token for it) last authenticated a call, to the minute
    # (rbac/machine_cache.py: a warm call writes nothing).
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [created_index("service_account")]

    def __str__(self) -> str:
        return self.name


class ServiceAccountKey(models.Model):
    """An API key of a service account: `iam_sk_` and 43 random base64url characters, answered once
    and stored as its keyed digest (`iam.platform.crypto.digest`); `prefix`, its first 12 characters, tells
    keys apart. Revoking keeps the row (`revoked_at`), so the audit trail and `last_used_at` stay."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    service_account = models.ForeignKey(ServiceAccount, on_delete=models.CASCADE, related_name="keys")
    name = models.CharField(max_length=255)
    prefix = models.CharField(max_length=12, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"
        indexes = [models.Index(fields=["service_account", "created_at"], name="service_account_key_sa")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
