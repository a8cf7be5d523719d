from django.urls import path

from . import api

urlpatterns = [
    path("auth/register", api.Register.as_view()),
    path("auth/login", api.Login.as_view()),
    path("auth/refresh", api.Refresh.as_view()),
    path("auth/revoke", api.Revoke.as_view()),
]

urlpatterns += [
    path("auth/oauth/idp_a/initiate", api.OAuthInitiate.as_view()),
    path("auth/oauth/idp_a/callback", api.oauth_callback),
]
