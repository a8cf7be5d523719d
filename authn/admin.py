"""Admin for credentials, sessions and signing keys, and the operator's own password change (the account
admin is accounts/admin.py's; the credential and session inlines here are shown on its account page).
Refresh-token rows are not registered: they are bookkeeping for rotation and reuse detection. Sessions
are listed on their account's page and in their own list, whose action ends the ones selected."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.forms import AdminPasswordChangeForm
from django.contrib.auth.models import Group
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from accounts import services as accounts
from accounts.models import Account
from iam.admin import audit_subject
from iam.http.admin import DeleteOnly, ReadOnlyInline, ServiceAdmin, ViewOnly, api_fields

from . import admin_login, keys, passkeys, serializers, services, sessions
from .credentials import delete_credential, update_credential
from .models import Credential, Passkey, Session, SigningKey


class OperatorPasswordChangeForm(AdminPasswordChangeForm):
    """The admin's own "change password" (old password, then the new one twice), saved through the
    service: every other session of the operator ends, this one is kept by the view. The form checks the
    same AUTH_PASSWORD_VALIDATORS as the API."""

    def save(self, commit: bool = True) -> Account:
        accounts.set_password(self.user, self.cleaned_data["new_password1"])
        return self.user


admin.site.password_change_form = OperatorPasswordChangeForm
# The sign-in asks an operator with a second factor for a code after the password, and one without a
# factor to set one up first while the root workspace requires MFA (authn/admin_login.py).
admin.site.login_view = admin_login.OperatorLoginView
admin.site.login_steps = (
    ("login/code/", admin_login.login_code, "login_code"),
    ("login/second-factor/", admin_login.login_setup, "login_setup"),
    ("login/passkey-options/", admin_login.login_passkey_options, "login_passkey_options"),
)
admin.site.session_allowed = admin_login.session_allowed
# Accounts carry no Django groups or model permissions: operators pass every check
# (docs/api.md#authorization).
admin.site.unregister(Group)


class CredentialInline(ReadOnlyInline):
    model = Credential
    fk_name = "account"
    fields = ("kind", "provider", "status", "workspace", "email", "last_used_at")

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).select_related("workspace")


class SessionInline(ReadOnlyInline):
    """The account's sessions (docs/api.md#sessions), newest first; each links to its page, and the sessions
    page ends the ones selected."""

    model = Session
    fk_name = "account"
    fields = ("created_at", "last_used_at", "expires_at", "revoked_at", "ip", "user_agent", "amr", "live")
    ordering = ("-created_at",)

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).select_related("account")

    @admin.display(boolean=True, description="live")
    def live(self, session: Session) -> bool:
        return _is_live(session)


def _is_live(session: Session) -> bool:
    return (
        session.revoked_at is None
        and session.expires_at > timezone.now()
        and session.session_version == session.account.session_version
    )


class PasskeyInline(ReadOnlyInline):
    """The account's passkeys (docs/api.md#passkeys); each links to its page, where an operator removes
    one."""

    model = Passkey
    fk_name = "account"
    fields = ("name", "backed_up", "created_at", "last_used_at")
    ordering = ("-created_at",)


@admin.register(Passkey)
class PasskeyAdmin(DeleteOnly, ServiceAdmin):
    """Passkeys are added and renamed by their holders (`auth/passkeys/register/*`); an operator only
    removes one, for an account that lost its device or whose passkey is suspected cloned
    (`passkey.clone_suspected`): recorded with the operator as actor, every session of the account ended
    and the account e-mailed, as the second-factor reset (docs/security.md#passkeys)."""

    list_display = ("name", "account", "backed_up", "created_at", "last_used_at")
    list_filter = ("backed_up",)
    search_fields = ("account__email", "name")
    list_select_related = ("account",)
    ordering = ("-created_at",)
    fields = ("id", "account", "name", "backed_up", "sign_count", "created_at", "last_used_at")
    readonly_fields = fields

    def remove(self, request: HttpRequest, obj: Passkey) -> None:
        passkeys.delete(obj, actor=request.user, by_operator=True)


@admin.register(Credential)
class CredentialAdmin(ServiceAdmin):
    """Credentials are created by registration, `accounts/create` and OAuth; here an operator only
    changes the status (a `revoked` password logs in nowhere, docs/api.md#authorization)."""

    list_display = ("account", "kind", "provider", "status", "workspace", "last_used_at", "created_at")
    list_filter = ("kind", "provider", "status", "workspace")
    search_fields = ("account__email", "email", "provider_id")
    list_select_related = ("account", "workspace")
    fields = api_fields(serializers.CredentialSerializer)
    readonly_fields = tuple(name for name in fields if name != "status")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def update(self, request: HttpRequest, current: Credential, form: forms.ModelForm) -> Credential:
        # Through the service, as over the API: recorded, and a revoke ends the account's sessions.
        return update_credential(current, status=form.cleaned_data["status"])

    def remove(self, request: HttpRequest, obj: Credential) -> None:
        delete_credential(obj)


@admin.register(Session)
class SessionAdmin(ViewOnly, admin.ModelAdmin):
    """Every session (docs/api.md#sessions): where and when it began, when it was last refreshed, how the
    account signed in. The one change is the action that ends the selected sessions, through the service the
    API's `sessions/revoke` calls (recorded, pushed, refused at once everywhere)."""

    list_display = ("id", "account", "created_at", "last_used_at", "expires_at", "ip", "amr", "live")
    list_select_related = ("account",)
    search_fields = ("account__email",)
    ordering = ("-created_at",)
    fields = (
        "id",
        "account",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
        "ip",
        "user_agent",
        "amr",
        "sso_workspace_id",
        "live",
    )
    readonly_fields = fields
    actions = ["end_sessions"]

    @admin.display(boolean=True, description="live")
    def live(self, session: Session) -> bool:
        return _is_live(session)

    @admin.action(description="End the selected sessions")
    def end_sessions(self, request: HttpRequest, queryset) -> None:
        with transaction.atomic():
            selected = list(queryset.select_for_update(of=("self",)))
            for session in selected:
                sessions.end_session(session, actor=request.user)
        self.message_user(request, f"{len(selected)} session(s) ended.", messages.SUCCESS)


@admin.register(SigningKey)
class SigningKeyAdmin(ViewOnly, admin.ModelAdmin):
    """The signing keys (RS256 always, and IAM_JWT_ALGORITHM's when it is EdDSA or ES256): public halves
    only, never the private key. Read-only; the rotate action is the one change (`manage.py
    rotate_signing_key`). None is deleted here: a key drops out by itself once the tokens it signed have
    expired."""

    list_display = ("kid", "algorithm", "created_at", "retired_at", "published")
    fields = ("kid", "algorithm", "public_key", "created_at", "retired_at", "published")
    readonly_fields = fields
    actions = ["rotate"]

    @admin.display(boolean=True, description="In the JWKS document")
    def published(self, key: SigningKey) -> bool:
        return key.kid in {jwk["kid"] for jwk in keys.published_keys()}

    @admin.action(description="Rotate: a new key signs from now on (select any key)")
    def rotate(self, request: HttpRequest, queryset) -> None:
        rotated = services.rotate_signing_key(actor=request.user)
        names = ", ".join(f"{key.kid} ({key.algorithm})" for key in rotated)
        self.message_user(request, f"New signing keys sign from now on: {names}.", messages.SUCCESS)


def credential_title(credential: Credential) -> str:
    return f"{credential.kind}/{credential.provider} of {credential.account.email}"


audit_subject(
    "session", Session.objects.select_related("account"), title=lambda s: f"session of {s.account.email}"
)
audit_subject(
    "passkey",
    Passkey.objects.select_related("account"),
    title=lambda passkey: f"passkey {passkey.name} of {passkey.account.email}",
    search=("account__email", "name"),
)
audit_subject(
    "credential",
    Credential.objects.select_related("account"),
    title=credential_title,
    search=("account__email", "email"),
)
