from django.urls import path

from . import api

urlpatterns = [
    path("clients/validate", api.ClientValidate.as_view()),  # the hot path, listed first and so tried first
    path("clients/events", api.ClientEvents.as_view()),
    path("clients/create", api.ClientCreate.as_view()),
    path("clients/describe", api.ClientDescribe.as_view()),
    path("clients/list", api.ClientList.as_view()),
    path("clients/update", api.ClientUpdate.as_view()),
    path("clients/delete", api.ClientDelete.as_view()),
    path("clients/regenerate-secret", api.ClientRegenerateSecret.as_view()),
]
