from django.urls import path

from iam.api import routes

from . import accounts, api, credential_endpoints, invitations, jwks

urlpatterns = [
    *routes(accounts, api, invitations, credential_endpoints),
    path("auth/oauth/idp_a/callback", api.oauth_callback),
    path(".well-known/jwks.json", jwks.Jwks.as_view()),
]
