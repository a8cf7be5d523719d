"""The account endpoints. Accounts owns the model and its services; the endpoints live here because
creating an account makes its password credential (authn) and who may read or change an account is
rbac's rule."""

from django.db.models import QuerySet
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
from iam.list_endpoint import ListEndpoint
from rbac.api import RecordEndpoint

from .services import create_password_account


class AccountEndpoint(RecordEndpoint):
    """An account named by `id` and/or `email` (both must match). Self access and root-workspace rights
    are `policy.authorize`'s (CONTRACT 4)."""

    lookup = ("id", "email")
    request_serializer = AccountRef
    response_serializer = AccountSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return Account.objects.all()


class AccountCreate(Endpoint, route="accounts/create"):
    permission = "accounts:create"
    request_serializer = AccountCreateRequest
    response_serializer = AccountSerializer

    def handle(self, request: Request, data: dict) -> dict:
        account = create_password_account(actor=request.user, **data)
        return self.serialize(account)


class AccountDescribe(AccountEndpoint, route="accounts/describe"):
    # Any account may describe itself (CONTRACT 4).
    read_only = True
    permission = "accounts:describe"
    per_record = True


class AccountList(ListEndpoint, route="accounts/list"):
    permission = "accounts:list"
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

    def get_queryset(self, request: Request):
        return Account.objects.all()


class AccountUpdate(AccountEndpoint, route="accounts/update"):
    # An account updates itself, except its enabled and verified flags (CONTRACT 4).
    permission = "accounts:update"
    per_record = True
    request_serializer = AccountUpdateRequest
    service = services.update_account


class AccountDelete(AccountEndpoint, route="accounts/delete"):
    permission = "accounts:delete"
    response_serializer = AccountDeleted
    service = services.delete_account
