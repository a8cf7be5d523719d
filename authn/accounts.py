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
from iam.api import Endpoint, ListEndpoint
from iam.errors import ApiError
from rbac import policy

from .services import create_password_account


def find_account(ref: dict) -> Account:
    lookup = {"pk": ref["id"]} if "id" in ref else {}
    if "email" in ref:
        lookup["email"] = ref["email"]
    account = Account.objects.filter(**lookup).first()
    if account is None:
        raise ApiError(404, "account not found")
    return account


def is_self(request: Request, ref: dict) -> bool:
    return (
        ref.get("id", request.user.pk) == request.user.pk
        and ref.get("email", request.user.email) == request.user.email
    )


class AccountCreate(Endpoint):
    permission = "accounts:create"
    request_serializer = AccountCreateRequest
    response_serializer = AccountSerializer

    def handle(self, request: Request, data: dict) -> dict:
        account = create_password_account(actor=request.user, **data)
        return self.serialize(account)


class AccountDescribe(Endpoint):
    read_only = True
    request_serializer = AccountRef
    response_serializer = AccountSerializer

    def handle(self, request: Request, data: dict) -> dict:
        # CONTRACT 4: any account may describe itself
        if not is_self(request, data):
            policy.require_global(request.user, "accounts:describe")
        return self.serialize(find_account(data))


class AccountList(ListEndpoint):
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


class AccountUpdate(Endpoint):
    request_serializer = AccountUpdateRequest
    response_serializer = AccountSerializer

    def handle(self, request: Request, data: dict) -> dict:
        # CONTRACT 4: an account updates itself, except its enabled and verified flags
        if not is_self(request, data) or "enabled" in data or "verified" in data:
            policy.require_global(request.user, "accounts:update")
        account = find_account(data)
        return self.serialize(services.update_account(account, changes=data, actor=request.user))


class AccountDelete(Endpoint):
    permission = "accounts:delete"
    request_serializer = AccountRef
    response_serializer = AccountDeleted

    def handle(self, request: Request, data: dict) -> dict:
        return services.delete_account(find_account(data), actor=request.user)
