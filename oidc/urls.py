from django.urls import path

from .api import applications

urlpatterns = [
    path("applications/create", applications.ApplicationCreate.as_view()),
    path("applications/describe", applications.ApplicationDescribe.as_view()),
    path("applications/list", applications.ApplicationList.as_view()),
    path("applications/update", applications.ApplicationUpdate.as_view()),
    path("applications/delete", applications.ApplicationDelete.as_view()),
    path("applications/regenerate-secret", applications.ApplicationRegenerateSecret.as_view()),
]
