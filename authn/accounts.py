"""The account endpoints. Accounts owns the model and its services; the endpoints live here because
creating an account makes its password credential (authn) and who may read or change an account is
rbac's rule."""

from rest_framework.request import Request

from accounts import services
from accounts.models import Account
from accounts.serializers import (
    AccountCreateRequest,
    AccountDeleted,
    AccountRef,
    AccountSerializer,
    AccountUpdateRequest,
)
from iam.api import Endpoint
from rbac.api import RecordEndpoint, RecordList

from .services import create_password_account


class AccountEndpoint(RecordEndpoint):
    """An account named by `id` and/or `email` (both must match). Self access and root-workspace rights
    are `policy.authorize`'s (CONTRACT 4)."""

    model = Account
    ref = AccountRef
    response_serializer = AccountSerializer


class AccountCreate(Endpoint, route="accounts/create"):
    """A new account with a password credential, `pending` until its e-mail address is confirmed: needs
    `accounts:create` in the root workspace."""

    example_request = {
        "email": "ada@example.com",
        "password": "correct-horse-battery-staple",
        "name": "Ada Lovelace",
        "description": "Support engineer",
        "tags": ["staff"],
        "meta": {"schema_version": "1"},
    }

    permission = "accounts:create"
    request_serializer = AccountCreateRequest
    response_serializer = AccountSerializer

    def handle(self, request: Request, data: dict) -> dict:
        account = create_password_account(actor=request.user, **data)
        return self.serialize(account)


class AccountDescribe(AccountEndpoint, route="accounts/describe"):
    """An account by `id` or `email` (both must match when both are given). Any account may describe
    itself; another needs `accounts:describe` in the root workspace."""

    example_request = {"email": "ada@example.com"}

    read_only = True
    per_record = True


class AccountList(RecordList, route="accounts/list"):
    """Every account: needs `accounts:list` in the root workspace."""

    example_request = {
        "filter": {"fields": {"verified": True}, "tags": ["staff"]},
        "options": {"limit": 20, "offset": 0, "order_bys": "!created_at"},
    }

    model = Account
    list_key = "accounts"
    response_serializer = AccountSerializer
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


class AccountUpdate(AccountEndpoint, route="accounts/update"):
    """Changes an account named by `id` or `email`. An account may change itself except its `enabled` and
    `verified` flags; anything else needs `accounts:update` in the root workspace. Disabling an account
    ends its sessions."""

    example_request = {
        "email": "ada@example.com",
        "name": "Ada King",
        "tags": ["staff", "admin"],
        "meta": {"schema_version": "1", "team": "core"},
    }

    per_record = True
    request_serializer = AccountUpdateRequest
    service = services.update_account


class AccountDelete(AccountEndpoint, route="accounts/delete"):
    """Deletes an account with its memberships and credentials: needs `accounts:delete` in the root workspace.
    Answers its `id` and `email`."""

    example_request = {"email": "ada@example.com"}

    response_serializer = AccountDeleted
    service = services.delete_account
