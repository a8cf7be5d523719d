from django.urls import path

from . import api

urlpatterns = [
    path("workspace/create", api.WorkspaceCreate.as_view()),
    path("workspace/describe", api.WorkspaceDescribe.as_view()),
    path("workspace/list", api.WorkspaceList.as_view()),
    path("workspace/update", api.WorkspaceUpdate.as_view()),
    path("workspace/delete", api.WorkspaceDelete.as_view()),
    path("projects/create", api.ProjectCreate.as_view()),
    path("projects/describe", api.ProjectDescribe.as_view()),
    path("projects/list", api.ProjectList.as_view()),
    path("projects/update", api.ProjectUpdate.as_view()),
    path("projects/delete", api.ProjectDelete.as_view()),
]
