from django.urls import path

from iam.api import routes

from . import api

urlpatterns = [*routes(api), path("auth/sso/callback", api.sso_callback)]
