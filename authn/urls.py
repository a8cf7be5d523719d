from django.urls import path

from . import api, credential_endpoints, jwks, mfa_endpoints, session_endpoints
from .pages import signin, signout, step_up

urlpatterns = [
    # Signing up, in and out
    path("auth/register", api.Register.as_view()),
    path("auth/login", api.Login.as_view()),
    path("auth/refresh", api.Refresh.as_view()),
    path("auth/revoke", api.Revoke.as_view()),
    path("auth/reset-password", api.ResetPassword.as_view()),
    path("auth/resend-confirm", api.ResendConfirm.as_view()),
    path("auth/update-password", api.UpdatePassword.as_view()),
    path("auth/confirm", api.Confirm.as_view()),
    path("auth/oauth/idp_a/initiate", api.OAuthInitiate.as_view()),
    path("auth/oauth/idp_a/callback", api.oauth_callback),
    # The second factor
    path("auth/mfa/totp/enroll", mfa_endpoints.TotpEnroll.as_view()),
    path("auth/mfa/totp/confirm", mfa_endpoints.TotpConfirm.as_view()),
    path("auth/mfa/totp/disable", mfa_endpoints.TotpDisable.as_view()),
    path("auth/mfa/verify", mfa_endpoints.MfaVerify.as_view()),
    # The caller's own sessions
    path("sessions/list", session_endpoints.SessionList.as_view()),
    path("sessions/revoke", session_endpoints.SessionRevoke.as_view()),
    # Credentials
    path("credentials/describe", credential_endpoints.CredentialDescribe.as_view()),
    path("credentials/list", credential_endpoints.CredentialList.as_view()),
    path("credentials/update", credential_endpoints.CredentialUpdate.as_view()),
    path("credentials/delete", credential_endpoints.CredentialDelete.as_view()),
    path(".well-known/jwks.json", jwks.Jwks.as_view()),
    # The hosted sign-in pages (docs/pages.md): HTML, the browser session's cookie, CSRF
    path("signin", signin.signin),
    path("signin/code", signin.second_factor),
    path("signin/mfa", step_up.step_up),
    path("signin/done", signin.signed_in),
    path("signout", signout.signout),
]
