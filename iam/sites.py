"""The admin site of the operators (CONTRACT 14), installed through `iam.apps.IamAdminConfig`."""

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
    # `accounts.services.set_password`, which ends every other session of the account (CONTRACT 5).
    password_change_form: type[forms.Form] = AdminPasswordChangeForm
    # The sign-in. `authn/admin.py` sets a view whose password step asks an operator with a second factor
    # for a code (`login/code/`, `second_step`) before signing it in: the admin is no way around MFA.
    login_view: type[LoginView] = LoginView
    second_step: Callable[[HttpRequest], HttpResponse] | None = None

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
        if self.second_step is not None:
            # Reached before sign-in, like `login/` itself (not wrapped in `admin_view`).
            urls.insert(0, path("login/code/", self.second_step, name="login_code"))
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
