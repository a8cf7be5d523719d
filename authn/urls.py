from django.urls import path

from .api import auth, credentials, jwks, mfa, passkeys, sessions
from .pages import (
    account,
    account_passkeys,
    email_links,
    invitation,
    passkey,
    signin,
    signout,
    signup,
    step_up,
)

urlpatterns = [
    # Signing up, in and out
    path("auth/register", auth.Register.as_view()),
    path("auth/login", auth.Login.as_view()),
    path("auth/refresh", auth.Refresh.as_view()),
    path("auth/revoke", auth.Revoke.as_view()),
    path("auth/reset-password", auth.ResetPassword.as_view()),
    path("auth/resend-confirm", auth.ResendConfirm.as_view()),
    path("auth/update-password", auth.UpdatePassword.as_view()),
    path("auth/confirm", auth.Confirm.as_view()),
    path("auth/oauth/idp_a/initiate", auth.OAuthInitiate.as_view()),
    path("auth/oauth/idp_a/callback", auth.oauth_callback),
    # The second factor
    path("auth/mfa/totp/enroll", mfa.TotpEnroll.as_view()),
    path("auth/mfa/totp/confirm", mfa.TotpConfirm.as_view()),
    path("auth/mfa/totp/disable", mfa.TotpDisable.as_view()),
    path("auth/mfa/verify", mfa.MfaVerify.as_view()),
    # Passkeys (docs/api.md#passkeys)
    path("auth/passkeys/register/options", passkeys.PasskeyRegisterOptions.as_view()),
    path("auth/passkeys/register/verify", passkeys.PasskeyRegisterVerify.as_view()),
    path("auth/passkeys/login/options", passkeys.PasskeyLoginOptions.as_view()),
    path("auth/passkeys/login/verify", passkeys.PasskeyLoginVerify.as_view()),
    path("passkeys/list", passkeys.PasskeyList.as_view()),
    path("passkeys/update", passkeys.PasskeyUpdate.as_view()),
    path("passkeys/delete", passkeys.PasskeyDelete.as_view()),
    # The caller's own sessions
    path("sessions/list", sessions.SessionList.as_view()),
    path("sessions/revoke", sessions.SessionRevoke.as_view()),
    # Credentials
    path("credentials/describe", credentials.CredentialDescribe.as_view()),
    path("credentials/list", credentials.CredentialList.as_view()),
    path("credentials/update", credentials.CredentialUpdate.as_view()),
    path("credentials/delete", credentials.CredentialDelete.as_view()),
    path(".well-known/jwks.json", jwks.Jwks.as_view()),
    # The hosted sign-in pages (docs/pages.md): HTML, the browser session's cookie, CSRF
    path("signin", signin.signin),
    path("signin/code", signin.second_factor),
    path("signin/passkey", signin.passkey_signin),
    path("signin/passkey/options", passkey.options),
    path("signin/mfa", step_up.step_up),
    path("signin/done", signin.signed_in),
    path("signout", signout.signout),
    # The self-service pages (docs/pages.md#self-service-pages): the e-mails' links land here
    path("signup", signup.signup),
    path("confirm-email", email_links.confirm_email),
    path("confirm-email/resend", email_links.resend_confirmation),
    path("forgot-password", email_links.forgot_password),
    path("reset-password", email_links.reset_password),
    path("accept-invitation", invitation.accept_invitation),
    # The signed-in person's own page (docs/pages.md#the-account-page): one route per action
    path("account", account.account),
    path("account/confirm", account.confirm),
    path("account/password", account.change_password),
    path("account/sessions/end", account.end_session),
    path("account/totp/set-up", account.set_up_totp),
    path("account/totp/turn-on", account.turn_on_totp),
    path("account/totp/turn-off", account.turn_off_totp),
    path("account/applications/revoke", account.revoke_application),
    # The account page's passkeys (docs/pages.md#passkeys)
    path("account/passkeys/options", account_passkeys.options),
    path("account/passkeys/add", account_passkeys.add),
    path("account/passkeys/remove", account_passkeys.remove),
]
