from django.urls import path

from . import oauth2
from .api import applications
from .pages import authorize, logout

urlpatterns = [
    path("applications/create", applications.ApplicationCreate.as_view()),
    path("applications/describe", applications.ApplicationDescribe.as_view()),
    path("applications/list", applications.ApplicationList.as_view()),
    path("applications/update", applications.ApplicationUpdate.as_view()),
    path("applications/delete", applications.ApplicationDelete.as_view()),
    path("applications/regenerate-secret", applications.ApplicationRegenerateSecret.as_view()),
    # The OpenID Provider (docs/oidc.md): its standards' formats, outside the envelope.
    path(".well-known/openid-configuration", oauth2.discovery),
    path("oauth2/authorize", authorize.authorize),
    path("oauth2/token", oauth2.token),
    path("oauth2/userinfo", oauth2.userinfo),
    path("oauth2/revoke", oauth2.revoke),
    path("oauth2/introspect", oauth2.introspect),
    path("oauth2/logout", logout.logout),
]
