"""SCIM 2.0 provisioning per workspace: the tokens a workspace's directory authenticates with, what the
directory said about the accounts it provisioned (their `externalId`), and the log of its last requests
(for an operator who wants to know why a sync fails)."""

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from iam.platform import retention
from tenancy.models import InWorkspace, created_index


class ScimToken(InWorkspace):
    """A bearer token of one workspace's SCIM service. Only its keyed digest is stored
    (`iam.platform.crypto.digest`), so a database dump holds no usable token; the token itself is answered
    once, at creation. It opens the SCIM service of its workspace and nothing else."""

    name = models.CharField(max_length=255)
    token_digest = models.CharField(max_length=64, unique=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(
        "accounts.Account", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = "SCIM token"
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="scim_token_unique_name")]
        indexes = [created_index("scim_token")]

    def __str__(self) -> str:
        return self.name


class ScimUser(models.Model):
    """What a workspace's directory told about an account it provisioned: its `externalId` (the
    directory's own id of the person), and whether the directory created the account (then it may also
    rename it). One row per account and workspace; the membership itself is rbac's."""

    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.CASCADE, related_name="+")
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    external_id = models.CharField(max_length=255, null=True, blank=True)
    created_account = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = "SCIM user"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "account"], name="scim_user_unique_account")
        ]
        indexes = [models.Index(fields=["workspace", "external_id"], name="scim_user_external_id")]

    def __str__(self) -> str:
        return f"{self.account_id} ({self.external_id or 'no externalId'})"


class ScimGroup(models.Model):
    """The directory's `externalId` of a Group (a role of the workspace)."""

    role = models.OneToOneField("rbac.Role", on_delete=models.CASCADE, related_name="+")
    external_id = models.CharField(max_length=255, null=True, blank=True)

    class Meta:
        verbose_name = "SCIM group"

    def __str__(self) -> str:
        return f"{self.role_id} ({self.external_id or 'no externalId'})"


class ScimRequest(models.Model):
    """One request to a workspace's SCIM service and its outcome, kept `IAM_SCIM_LOG_DAYS` days
    (`manage.py cleanup`). It stores no body and no header: the method, the path (with its query), the
    status, RFC 7644's `scimType` and the error's detail."""

    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.CASCADE, related_name="+")
    token = models.ForeignKey(ScimToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=1024)
    status = models.PositiveSmallIntegerField()
    scim_type = models.CharField("SCIM type", max_length=32, blank=True, default="")
    detail = models.CharField(max_length=512, blank=True, default="")
    duration_ms = models.PositiveIntegerField("duration (ms)", default=0)
    occurred_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = "SCIM request"
        indexes = [models.Index(fields=["workspace", "occurred_at"], name="scim_request_recent")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} {self.status}"


@retention.sweep("scim requests")
def sweep_scim_requests(now, kept_since) -> int:
    cut_off = now - timedelta(days=settings.IAM_SCIM_LOG_DAYS)
    return ScimRequest.objects.filter(occurred_at__lt=cut_off).delete()[0]
