from django.urls import path

from iam.api import routes

from . import api

urlpatterns = [
    *routes(api),
    path("roles/create", api.RoleCreate.as_view()),
    path("roles/describe", api.RoleDescribe.as_view()),
    path("roles/list", api.RoleList.as_view()),
    path("roles/update", api.RoleUpdate.as_view()),
    path("roles/delete", api.RoleDelete.as_view()),
]
