from django.urls import path

from iam.api import routes

from . import accounts, api, credential_endpoints, invitations, jwks, mfa_endpoints, session_endpoints

urlpatterns = [
    *routes(accounts, api, invitations, credential_endpoints, session_endpoints, mfa_endpoints),
    path("auth/oauth/idp_a/callback", api.oauth_callback),
    path(".well-known/jwks.json", jwks.Jwks.as_view()),
]
