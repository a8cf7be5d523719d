"""Admin for accounts: the account list and page, with the account's memberships, credentials and
sessions, a form that sets a new password, and "check access" (the `permissions/check` answer for
operators). Its add form creates the password credential as `accounts/create` does
(`authn.services.create_password_account`): the admin is the HTTP tier, which may use the domain tier of
any app (docs/architecture.md).

Password hashes are never rendered: the change form excludes `password` and shows only whether one is
set, with a link to a form that sets a new one through `accounts.services.set_password` (which ends every
session)."""

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import update_session_auth_hash
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from authn import mfa
from authn.admin import CredentialInline, PasskeyInline, SessionInline
from authn.models import Passkey, RecoveryCode, Totp
from authn.services import create_password_account
from iam.admin import audit_subject
from iam.http.admin import RESOURCE_READONLY, ReadOnlyInline, ServiceAdmin, ServiceForm, check_with
from iam.http.errors import ApiError
from iam.http.fields import PERMISSION_NAME_MAX
from rbac.admin import names_column
from rbac.explain import explain
from rbac.models import Membership
from rbac.serializers import PermissionCheckRequest
from tenancy.models import Project, Workspace

from . import serializers, services
from .models import Account, normalize_email


def check_passwords(form: forms.Form, cleaned: dict[str, Any], account: Account | None = None) -> None:
    """`password1` and `password2` match, and `password1` keeps the API's password rules."""
    password = cleaned.get("password1")
    if password and password != cleaned.get("password2"):
        form.add_error("password2", "passwords do not match")
    elif password:
        try:
            services.check_password_rules(password, account)
        except ApiError as exc:
            form.add_error("password1", exc.message)


class AccountChangeForm(ServiceForm):
    update_request = serializers.AccountUpdateRequest  # the add form is AccountCreationForm
    avatar_url = forms.URLField(required=False, max_length=2048, assume_scheme="https", empty_value=None)


class AccountCreationForm(ServiceForm):
    create_request = serializers.AccountCreateRequest
    create_partial = True  # the password is checked here, by the same rules
    password1 = forms.CharField(label="Password", strip=False, widget=forms.PasswordInput)
    password2 = forms.CharField(label="Password (again)", strip=False, widget=forms.PasswordInput)

    def clean_email(self) -> str:
        return normalize_email(self.cleaned_data["email"])

    def clean_relations(self, cleaned: dict[str, Any]) -> None:
        check_passwords(self, cleaned)


class SetPasswordForm(forms.Form):
    password1 = forms.CharField(
        label="New password", strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )
    password2 = forms.CharField(
        label="New password (again)",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def __init__(self, account: Account, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.account = account

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        check_passwords(self, cleaned, self.account)
        return cleaned


class MembershipInline(ReadOnlyInline):
    model = Membership
    fk_name = "account"
    fields = ("workspace", "project", "scope", "status", "role_names", "created_at")
    role_names = names_column("roles")

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).select_related("workspace", "project").prefetch_related("roles")


@admin.register(Account)
class AccountAdmin(ServiceAdmin):
    form = AccountChangeForm
    add_form = AccountCreationForm
    list_display = (
        "email",
        "name",
        "enabled",
        "verified",
        "is_superuser",
        "password_state",
        "last_login",
        "created_at",
    )
    list_filter = ("enabled", "verified", "is_superuser")
    search_fields = ("email", "name")
    ordering = ("email",)
    readonly_fields = (
        *RESOURCE_READONLY,
        "email",
        "password_state",
        "access",
        "second_factor",
        "sessions",
        "session_version",
        "last_login",
        "created_by",
        "updated_by",
    )
    fieldsets = (
        (None, {"fields": ("id", "email", "name", "description", "avatar_url", "password_state", "access")}),
        (
            "Status",
            {
                "fields": (
                    "enabled",
                    "verified",
                    "is_superuser",
                    "second_factor",
                    "sessions",
                    "session_version",
                    "last_login",
                )
            },
        ),
        ("Data", {"fields": ("tags", "meta")}),
        ("History", {"fields": ("created_at", "created_by", "updated_at", "updated_by")}),
    )
    add_fieldsets = (
        (None, {"fields": ("email", "name", "password1", "password2", "verified", "is_superuser")}),
    )
    inlines = (MembershipInline, CredentialInline, PasskeyInline, SessionInline)
    actions = ("enable_accounts", "disable_accounts", "end_account_sessions")
    delete_service = staticmethod(services.delete_account)

    @admin.display(description="password")
    def password_state(self, account: Account) -> str:
        state = "set" if account.has_usable_password() else "not set"
        if account._state.adding:
            return state
        url = reverse("admin:accounts_account_password", args=[account.pk])
        return format_html('{} (<a href="{}">set a new password</a>)', state, url)

    @admin.display(description="access")
    def access(self, account: Account) -> str:
        url = reverse("admin:accounts_account_check_access", args=[account.pk])
        return format_html('<a href="{}">check access</a> (why may this account do something?)', url)

    @admin.display(description="second factor")
    def second_factor(self, account: Account) -> str:
        totp = Totp.objects.filter(account=account).first()
        left = RecoveryCode.objects.filter(account=account, used_at__isnull=True).count()
        keys = Passkey.objects.filter(account=account).count()
        passkeys = f"{keys} passkey(s), listed below" if keys else ""
        if totp is None and not left:
            return passkeys or "none"
        state = "TOTP, pending confirmation" if totp is None or totp.confirmed_at is None else "TOTP"
        url = reverse("admin:accounts_account_reset_second_factor", args=[account.pk])
        return format_html(
            '{}, {} unused recovery code(s) (<a href="{}">reset second factor</a>){}',
            state,
            left,
            url,
            f"; {passkeys}" if passkeys else "",
        )

    @admin.display(description="sessions")
    def sessions(self, account: Account) -> str:
        url = reverse("admin:authn_session_changelist") + "?" + urlencode({"q": account.email})
        return format_html('<a href="{}">end one of its sessions</a> (listed below)', url)

    def get_fieldsets(self, request: HttpRequest, obj=None):
        return self.add_fieldsets if obj is None else self.fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return () if obj is None else self.readonly_fields

    def create(self, request: HttpRequest, form: forms.ModelForm) -> Account:
        data = form.cleaned_data
        return create_password_account(
            email=data["email"],
            password=data["password1"],
            name=data["name"],
            actor=request.user,
            verified=data["verified"],
            is_superuser=data["is_superuser"],
        )

    def update(self, request: HttpRequest, current: Account, form: ServiceForm) -> Account:
        changes = form.changes()
        if changes:
            services.update_account(current, **changes, actor=request.user)
        if "is_superuser" in form.changed_data:
            services.set_operator(current, operator=form.cleaned_data["is_superuser"], actor=request.user)
        return current

    def _set_enabled(self, request: HttpRequest, queryset, enabled: bool) -> None:
        with transaction.atomic():
            targets = [account for account in queryset if account.enabled != enabled]
            for account in targets:
                services.update_account(account, enabled=enabled, actor=request.user)
        verb = "enabled" if enabled else "disabled"
        self.message_user(request, f"{len(targets)} account(s) {verb}.", messages.SUCCESS)

    @admin.action(description="Enable the selected accounts")
    def enable_accounts(self, request: HttpRequest, queryset) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable the selected accounts")
    def disable_accounts(self, request: HttpRequest, queryset) -> None:
        self._set_enabled(request, queryset, False)

    @admin.action(description="End every session of the selected accounts")
    def end_account_sessions(self, request: HttpRequest, queryset) -> None:
        with transaction.atomic():
            selected = list(queryset)
            for account in selected:
                services.end_sessions(account)
        self.message_user(request, f"Sessions of {len(selected)} account(s) ended.", messages.SUCCESS)

    def get_urls(self):
        return [
            path(
                "<path:object_id>/password/",
                self.admin_site.admin_view(self.password_view),
                name="accounts_account_password",
            ),
            path(
                "<path:object_id>/reset-second-factor/",
                self.admin_site.admin_view(self.reset_second_factor_view),
                name="accounts_account_reset_second_factor",
            ),
            path(
                "<path:object_id>/check-access/",
                self.admin_site.admin_view(self.check_access_view),
                name="accounts_account_check_access",
            ),
            *super().get_urls(),
        ]

    def _account(self, request: HttpRequest, object_id: str, *, change: bool = True) -> Account:
        """The account of an account page's own view: 404 when there is none, 403 when `change` is needed
        and the operator may not change it."""
        account = self.get_object(request, unquote(object_id))
        if account is None:
            raise Http404("account not found")
        if change and not self.has_change_permission(request, account):
            raise PermissionDenied
        return account

    def _page(
        self, request: HttpRequest, account: Account, template: str, title: str, **context: Any
    ) -> HttpResponse:
        """`template` (under admin/accounts/account/), titled `<title>: <the account's address>`."""
        context = {
            **self.admin_site.each_context(request),
            "title": f"{title}: {account.email}",
            **context,
            "opts": self.opts,
            "original": account,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, f"admin/accounts/account/{template}", context)

    def password_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        account = self._account(request, object_id)
        form = SetPasswordForm(account, request.POST or None)
        if request.method == "POST" and form.is_valid():
            with transaction.atomic():
                services.set_password(account, form.cleaned_data["password1"])
            self.log_change(request, account, [{"changed": {"fields": ["password"]}}])
            if account.pk == request.user.pk:
                # The operator's own admin session is bound to the session version that just moved.
                update_session_auth_hash(request, account)
            self.message_user(request, "Password set; every session of the account ended.", messages.SUCCESS)
            return HttpResponseRedirect(reverse("admin:accounts_account_change", args=[account.pk]))
        return self._page(request, account, "password.html", "Set password", form=form)

    def reset_second_factor_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """For an account that lost its authenticator and its recovery codes: asks to confirm, then
        removes them and ends every session of the account (`authn.mfa.reset`: recorded, e-mailed)."""
        account = self._account(request, object_id)
        if request.method == "POST":
            with transaction.atomic():
                done = mfa.reset(account, actor=request.user)
            if done:
                self.log_change(request, account, [{"changed": {"fields": ["second factor"]}}])
                if account.pk == request.user.pk:
                    # The operator's own admin session is bound to the session version that just moved.
                    account.refresh_from_db()
                    update_session_auth_hash(request, account)
                message = "Second factor reset; every session of the account ended and the account e-mailed."
                self.message_user(request, message, messages.SUCCESS)
            else:
                self.message_user(request, "The account has no second factor.", messages.WARNING)
            return HttpResponseRedirect(reverse("admin:accounts_account_change", args=[account.pk]))
        return self._page(request, account, "reset_second_factor.html", "Reset second factor")

    def check_access_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """`POST /permissions/check` for operators: the same answer (`rbac.explain.explain`), read-only."""
        account = self._account(request, object_id, change=False)
        form = CheckAccessForm(request.GET or None)
        answer = None
        if form.is_valid():
            data = form.cleaned_data
            project = data.get("project")
            answer = explain(
                account, data["workspace"].pk, data["permission"], project_id=project.pk if project else None
            )
        return self._page(request, account, "check_access.html", "Check access", form=form, answer=answer)


class CheckAccessForm(forms.Form):
    workspace = forms.ModelChoiceField(queryset=Workspace.objects.order_by("slug"), to_field_name="slug")
    permission = forms.CharField(
        max_length=PERMISSION_NAME_MAX, help_text="resource:action, e.g. projects:update"
    )
    project = forms.ModelChoiceField(
        queryset=Project.objects.select_related("workspace").order_by("name"),
        required=False,
        help_text="for a project-scope grant",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        check_with(self, PermissionCheckRequest, {"permission": cleaned.get("permission", "")})
        project, workspace = cleaned.get("project"), cleaned.get("workspace")
        if project is not None and workspace is not None and project.workspace_id != workspace.pk:
            self.add_error("project", "project_id must name a project of this workspace")
        return cleaned


# "account" names actors too; the actor filter lists the operators (each entry's actor links to its own).
audit_subject(
    "account",
    Account.objects.all(),
    search=("email",),
    choices=Account.objects.filter(is_superuser=True).order_by("email"),
)
