"""The hosted sign-in pages' forms: what each field is called (the API's words, through gettext) and
what it must hold before a service sees it. The rules themselves are the services'."""

from django import forms
from django.utils.translation import gettext_lazy as _

from iam.http.fields import is_address

EMAIL_MAX = 254  # accounts.models.Account.email
PASSWORD_MAX = 1024  # accounts.validators.MaximumLengthValidator


def password_field(label: str, required: str) -> forms.CharField:
    """A password as typed: not stripped, as long as the API takes."""
    return forms.CharField(
        label=label, max_length=PASSWORD_MAX, strip=False, error_messages={"required": required}
    )


def text_field(label: str, required: str, *, max_length: int) -> forms.CharField:
    """A line of text (stripped) with its message when left empty."""
    return forms.CharField(label=label, max_length=max_length, error_messages={"required": required})


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
    password = password_field(_("Password"), _("Enter your password."))


class CodeForm(forms.Form):
    field_name = "code"
    code = text_field(_("Code"), _("Enter the 6-digit code from your authenticator app."), max_length=16)


class RecoveryCodeForm(forms.Form):
    field_name = "recovery_code"
    recovery_code = text_field(_("Recovery code"), _("Enter one of your recovery codes."), max_length=64)


class PasskeyNameForm(forms.Form):
    """What `Add a passkey` posts besides the credential: the name the person gives it."""

    name = text_field(
        _("Passkey name"), _("Name the passkey, for example after the device that holds it."), max_length=100
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
    password = password_field(_("New password"), _("Enter a new password."))


class SignupForm(AddressForm):
    name = text_field(_("Name"), _("Enter your name."), max_length=NAME_MAX)
    password = password_field(_("Password"), _("Choose a password."))

    field_order = ("name", "email", "password")


class InvitedAccountForm(forms.Form):
    """Creating the account an invitation's link names (the address is the invitation's)."""

    name = text_field(_("Name"), _("Enter your name."), max_length=NAME_MAX)
    password = password_field(_("Password"), _("Choose a password."))


def password_rule_message(message: str) -> str:
    """The API's password rule (accounts.services.check_password_rules) in page words."""
    words = {
        "password must have at least 8 characters": _("Use at least 8 characters."),
        "password is too common": _("This password is too common. Choose another."),
    }
    return str(words.get(message, _("Choose another password.")))


# `/account` (docs/pages.md#the-account-page)


class ChangePasswordForm(forms.Form):
    current_password = password_field(_("Current password"), _("Enter your current password."))
    new_password = password_field(_("New password"), _("Enter a new password."))


class ConfirmPasswordForm(forms.Form):
    field_name = "password"
    password = password_field(_("Password"), _("Enter your password."))


class TurnOffForm(forms.Form):
    """A code of the authenticator app, or one of the recovery codes, in one field."""

    field_name = "code"
    code = text_field(
        _("Code"), _("Enter a code from your authenticator app, or a recovery code."), max_length=64
    )


class RecordForm(forms.Form):
    """The one record a button acts on (a session, an application's consent, a passkey)."""

    id = forms.UUIDField()
