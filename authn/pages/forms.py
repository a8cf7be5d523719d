"""The hosted sign-in pages' forms: what each field is called (the API's words, through gettext) and
what it must hold before a service sees it. The rules themselves are the services'."""

from django import forms
from django.utils.translation import gettext_lazy as _

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


class PasskeyNameForm(forms.Form):
    """What `Add a passkey` posts besides the credential: the name the person gives it."""

    name = forms.CharField(
        label=_("Passkey name"),
        max_length=100,
        error_messages={"required": _("Name the passkey, for example after the device that holds it.")},
    )


class ChangePasswordForm(forms.Form):
    current_password = forms.CharField(
        label=_("Current password"),
        max_length=PASSWORD_MAX,
        strip=False,
        error_messages={"required": _("Enter your current password.")},
    )
    new_password = forms.CharField(
        label=_("New password"),
        max_length=PASSWORD_MAX,
        strip=False,
        error_messages={"required": _("Enter a new password.")},
    )


class ConfirmPasswordForm(forms.Form):
    field_name = "password"
    password = forms.CharField(
        label=_("Password"),
        max_length=PASSWORD_MAX,
        strip=False,
        error_messages={"required": _("Enter your password.")},
    )


class TurnOffForm(forms.Form):
    """A code of the authenticator app, or one of the recovery codes, in one field."""

    field_name = "code"
    code = forms.CharField(
        label=_("Code"),
        max_length=64,
        error_messages={"required": _("Enter a code from your authenticator app, or a recovery code.")},
    )


class RecordForm(forms.Form):
    """The one record a button acts on (a session, an application's consent, a passkey)."""

    id = forms.UUIDField()
