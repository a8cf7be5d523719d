from django.urls import path

from .api import clients, events, validate

urlpatterns = [
    path(
        "clients/validate", validate.ClientValidate.as_view()
    ),  # the hot path, listed first and so tried first
    path("clients/events", events.ClientEvents.as_view()),
    path("clients/create", clients.ClientCreate.as_view()),
    path("clients/describe", clients.ClientDescribe.as_view()),
    path("clients/list", clients.ClientList.as_view()),
    path("clients/update", clients.ClientUpdate.as_view()),
    path("clients/delete", clients.ClientDelete.as_view()),
    path("clients/regenerate-secret", clients.ClientRegenerateSecret.as_view()),
]
