"""The admin site of the operators (docs/operations.md#the-admin-and-management-commands), installed through
`iam.apps.IamAdminConfig`."""

from collections.abc import Callable

from django import forms
from django.contrib import admin
from django.contrib.admin.forms import AdminPasswordChangeForm
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.contrib.auth.views import LoginView, PasswordChangeView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse


class IamAdminSite(admin.AdminSite):
    site_header = "IAM"
    site_title = "IAM admin"
    index_title = "Operations"
    site_url = None  # no public site to link to
    # The operator's own "change password" form. `authn/admin.py` sets one whose save goes through
    # `accounts.services.set_password`, which ends every other session of the account
    # (docs/security.md#tokens).
    password_change_form: type[forms.Form] = AdminPasswordChangeForm
    # The sign-in. `authn/admin.py` sets a view whose password step asks an operator with a second factor
    # for a code before signing it in, or one without a factor to set one up first while the policy says
    # so (`login_steps`: each step's path, view and URL name): the admin is no way around MFA.
    login_view: type[LoginView] = LoginView
    login_steps: tuple[tuple[str, Callable[[HttpRequest], HttpResponse], str], ...] = ()
    # Whether the signed-in browser session may use the admin at all (`authn/admin.py` sets the policy's
    # answer: a session that skipped the second factor may not while the root workspace requires one).
    session_allowed: Callable[[HttpRequest], bool] | None = None

    def has_permission(self, request: HttpRequest) -> bool:
        allowed = self.session_allowed
        return super().has_permission(request) and (allowed is None or allowed(request))

    def login(self, request: HttpRequest, extra_context=None) -> HttpResponse:
        """Django's `AdminSite.login`, answered by `login_view`."""
        if request.method == "GET" and self.has_permission(request):
            return HttpResponseRedirect(reverse("admin:index", current_app=self.name))
        from django.contrib.admin.forms import AdminAuthenticationForm

        context = {
            **self.each_context(request),
            "title": "Log in",
            "subtitle": None,
            "app_path": request.get_full_path(),
            "username": request.user.get_username(),
        }
        if REDIRECT_FIELD_NAME not in request.GET and REDIRECT_FIELD_NAME not in request.POST:
            context[REDIRECT_FIELD_NAME] = reverse("admin:index", current_app=self.name)
        context.update(extra_context or {})
        request.current_app = self.name
        return self.login_view.as_view(
            extra_context=context,
            authentication_form=self.login_form or AdminAuthenticationForm,
            template_name=self.login_template or "admin/login.html",
        )(request)

    def get_urls(self):
        urls = super().get_urls()
        for route, view, name in self.login_steps:
            # Reached before sign-in, like `login/` itself (not wrapped in `admin_view`).
            urls.insert(0, path(route, view, name=name))
        return urls

    def password_change(self, request: HttpRequest, extra_context=None) -> HttpResponse:
        defaults = {
            "form_class": self.password_change_form,
            "success_url": reverse("admin:password_change_done", current_app=self.name),
            "extra_context": {**self.each_context(request), **(extra_context or {})},
        }
        if self.password_change_template is not None:
            defaults["template_name"] = self.password_change_template
        request.current_app = self.name
        return PasswordChangeView.as_view(**defaults)(request)
