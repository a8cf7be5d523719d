"""The hosted sign-in pages' forms: what each field is called (the API's words, through gettext) and
what it must hold before a service sees it. The rules themselves are the services'."""

from django import forms
from django.utils.translation import gettext_lazy as _

from iam.http.fields import is_address

EMAIL_MAX = 254  # accounts.models.Account.email
PASSWORD_MAX = 1024  # accounts.validators.MaximumLengthValidator


class EmailForm(forms.Form):
    email = forms.EmailField(
        label=_("Email"),
        max_length=EMAIL_MAX,
        error_messages={
            "required": _("Enter your email address."),
            "invalid": _("Enter an email address like name@example.com."),
        },
    )


class PasswordForm(EmailForm):
    password = forms.CharField(
        label=_("Password"),
        max_length=PASSWORD_MAX,
        strip=False,
        error_messages={"required": _("Enter your password.")},
    )


class CodeForm(forms.Form):
    field_name = "code"
    code = forms.CharField(
        label=_("Code"),
        max_length=16,
        error_messages={"required": _("Enter the 6-digit code from your authenticator app.")},
    )


class RecoveryCodeForm(forms.Form):
    field_name = "recovery_code"
    recovery_code = forms.CharField(
        label=_("Recovery code"),
        max_length=64,
        error_messages={"required": _("Enter one of your recovery codes.")},
    )


NAME_MAX = 255  # accounts.models.Account.name


class AddressForm(EmailForm):
    """An address as the API takes it (`iam.http.fields.is_address`): one `@`, no quoted part, no comment."""

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip().lower()
        if not is_address(email):
            raise forms.ValidationError(self.fields["email"].error_messages["invalid"])
        return email


class NewPasswordForm(forms.Form):
    password = forms.CharField(
        label=_("New password"),
        max_length=PASSWORD_MAX,
        strip=False,
        error_messages={"required": _("Enter a new password.")},
    )


class SignupForm(AddressForm):
    name = forms.CharField(
        label=_("Name"),
        max_length=NAME_MAX,
        error_messages={"required": _("Enter your name.")},
    )
    password = forms.CharField(
        label=_("Password"),
        max_length=PASSWORD_MAX,
        strip=False,
        error_messages={"required": _("Choose a password.")},
    )

    field_order = ("name", "email", "password")


class InvitedAccountForm(forms.Form):
    """Creating the account an invitation's link names (the address is the invitation's)."""

    name = forms.CharField(
        label=_("Name"),
        max_length=NAME_MAX,
        error_messages={"required": _("Enter your name.")},
    )
    password = forms.CharField(
        label=_("Password"),
        max_length=PASSWORD_MAX,
        strip=False,
        error_messages={"required": _("Choose a password.")},
    )


def password_rule_message(message: str) -> str:
    """The API's password rule (accounts.services.check_password_rules) in page words."""
    words = {
        "password must have at least 8 characters": _("Use at least 8 characters."),
        "password is too common": _("This password is too common. Choose another."),
    }
    return str(words.get(message, _("Choose another password.")))
