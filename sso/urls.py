from django.urls import path

from . import api

urlpatterns = [
    path("sso/create", api.SsoCreate.as_view()),
    path("sso/describe", api.SsoDescribe.as_view()),
    path("sso/list", api.SsoList.as_view()),
    path("sso/update", api.SsoUpdate.as_view()),
    path("sso/delete", api.SsoDelete.as_view()),
    path("sso/verify-domain", api.SsoVerifyDomain.as_view()),
    path("auth/sso/initiate", api.SsoInitiate.as_view()),
    path("auth/sso/callback", api.sso_callback),
    path("saml/<uuid:connection_id>/metadata", api.saml_metadata),
    path("saml/<uuid:connection_id>/acs", api.saml_acs),
]
