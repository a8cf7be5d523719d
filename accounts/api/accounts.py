"""`accounts/create|describe|list|update|delete`."""

from django.db.models import QuerySet
from rest_framework.request import Request

from authn.services import create_password_account
from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of
from rbac.api.access import get_object, named_by

from .. import serializers, services
from ..models import Account


def account_named(request: Request, data: dict, *, permission: str) -> Account:
    """The account the body names by `id` and/or `email` (both must match), once the caller may act on it
    with `permission` and the fields the body sends."""
    return get_object(
        request, Account.objects.all(), permission=permission, fields=data, **named_by(data, "id", "email")
    )


class AccountCreate(Endpoint):
    """A new account with a password credential, `pending` until its e-mail address is confirmed: needs
    `accounts:create` in the root workspace."""

    summary = "Create an account with a password"
    example_request = {
        "email": "ada@example.com",
        "password": "correct-horse-battery-staple",
        "name": "Ada Lovelace",
        "description": "Support engineer",
        "tags": ["staff"],
        "meta": {"schema_version": "1"},
    }

    permission = "accounts:create"
    request_serializer = serializers.AccountCreateRequest
    response_serializer = serializers.AccountSerializer

    def handle(self, request: Request, data: dict) -> dict:
        account = create_password_account(actor=request.user, **data)
        return self.serialize(account)


class AccountDescribe(Endpoint):
    """An account by `id` or `email` (both must match when both are given). Any account may describe
    itself; another needs `accounts:describe` in the root workspace."""

    summary = "Describe an account"
    example_request = {"email": "ada@example.com"}

    permission = "accounts:describe"
    decided_on_object = True
    read_only = True
    request_serializer = serializers.AccountRef
    response_serializer = serializers.AccountSerializer

    def handle(self, request: Request, data: dict) -> dict:
        return self.serialize(account_named(request, data, permission=self.permission))


class AccountList(ListEndpoint):
    """Every account: needs `accounts:list` in the root workspace (and, while the root workspace requires
    MFA, a session that used two factors: else 403 `mfa required by this workspace`)."""

    summary = "List accounts"
    example_request = {
        "filter": {"fields": {"verified": True}, "tags": ["staff"]},
        "options": {"limit": 20, "offset": 0, "order_bys": "!created_at"},
    }

    permission = "accounts:list"
    list_key = "accounts"
    response_serializer = serializers.AccountSerializer
    filter_fields = {
        name: name
        for name in (
            "id",
            "email",
            "name",
            "description",
            "avatar_url",
            "verified",
            "enabled",
            "created_by",
            "created_at",
            "updated_by",
            "updated_at",
        )
    }

    def get_queryset(self, request: Request) -> QuerySet:
        return Account.objects.all()


class AccountUpdate(Endpoint):
    """Changes an account named by `id` or `email`. An account may change itself except its `enabled` and
    `verified` flags; anything else needs `accounts:update` in the root workspace. Disabling an account
    ends its sessions."""

    summary = "Change an account"
    example_request = {
        "email": "ada@example.com",
        "name": "Ada King",
        "tags": ["staff", "admin"],
        "meta": {"schema_version": "1", "team": "core"},
    }

    permission = "accounts:update"
    decided_on_object = True
    request_serializer = serializers.AccountUpdateRequest
    response_serializer = serializers.AccountSerializer

    def handle(self, request: Request, data: dict) -> dict:
        account = account_named(request, data, permission=self.permission)
        changes = changes_of(data, "id", "email")
        return self.serialize(services.update_account(account, **changes, actor=request.user))


class AccountDelete(Endpoint):
    """Deletes an account with its memberships and credentials: needs `accounts:delete` in the root workspace.
    Answers its `id` and `email`."""

    summary = "Delete an account"
    example_request = {"email": "ada@example.com"}

    permission = "accounts:delete"
    request_serializer = serializers.AccountRef
    response_serializer = serializers.AccountDeleted

    def handle(self, request: Request, data: dict) -> dict:
        account = account_named(request, data, permission=self.permission)
        return services.delete_account(account, actor=request.user)
