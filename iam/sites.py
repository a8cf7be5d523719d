"""The admin site of the operators (CONTRACT 14), installed through `iam.apps.IamAdminConfig`."""

from django import forms
from django.contrib import admin
from django.contrib.admin.forms import AdminPasswordChangeForm
from django.contrib.auth.views import PasswordChangeView
from django.http import HttpRequest, HttpResponse
from django.urls import reverse


class IamAdminSite(admin.AdminSite):
    site_header = "IAM"
    site_title = "IAM admin"
    index_title = "Operations"
    site_url = None  # no public site to link to
    # The operator's own "change password" form. `authn/admin.py` sets one whose save goes through
    # `accounts.services.set_password`, which ends every other session of the account (CONTRACT 5).
    password_change_form: type[forms.Form] = AdminPasswordChangeForm

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
