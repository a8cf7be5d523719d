from django.urls import path

from . import accounts, api, credential_endpoints, invitations, jwks

urlpatterns = [
    path("accounts/create", accounts.AccountCreate.as_view()),
    path("accounts/describe", accounts.AccountDescribe.as_view()),
    path("accounts/list", accounts.AccountList.as_view()),
    path("accounts/update", accounts.AccountUpdate.as_view()),
    path("accounts/delete", accounts.AccountDelete.as_view()),
    path("auth/register", api.Register.as_view()),
    path("auth/login", api.Login.as_view()),
    path("auth/refresh", api.Refresh.as_view()),
    path("auth/revoke", api.Revoke.as_view()),
    path("auth/reset-password", api.ResetPassword.as_view()),
    path("auth/update-password", api.UpdatePassword.as_view()),
    path("auth/confirm", api.Confirm.as_view()),
    path("auth/resend-confirm", api.ResendConfirm.as_view()),
    path("memberships/accept", invitations.MembershipAccept.as_view()),
    path("memberships/decline", invitations.MembershipDecline.as_view()),
    path("credentials/describe", credential_endpoints.CredentialDescribe.as_view()),
    path("credentials/list", credential_endpoints.CredentialList.as_view()),
    path("credentials/update", credential_endpoints.CredentialUpdate.as_view()),
    path("credentials/delete", credential_endpoints.CredentialDelete.as_view()),
]

urlpatterns += [
    path("auth/oauth/idp_a/initiate", api.OAuthInitiate.as_view()),
    path("auth/oauth/idp_a/callback", api.oauth_callback),
    path(".well-known/jwks.json", jwks.Jwks.as_view()),
]
