from django.urls import path

from .api import connections, login, saml

urlpatterns = [
    path("sso/create", connections.SsoCreate.as_view()),
    path("sso/describe", connections.SsoDescribe.as_view()),
    path("sso/list", connections.SsoList.as_view()),
    path("sso/update", connections.SsoUpdate.as_view()),
    path("sso/delete", connections.SsoDelete.as_view()),
    path("sso/verify-domain", connections.SsoVerifyDomain.as_view()),
    path("auth/sso/initiate", login.SsoInitiate.as_view()),
    path("auth/sso/callback", login.sso_callback),
    path("saml/<uuid:connection_id>/metadata", saml.saml_metadata),
    path("saml/<uuid:connection_id>/acs", saml.saml_acs),
]
