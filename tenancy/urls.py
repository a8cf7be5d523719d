from django.urls import path

from .api import projects, workspaces

urlpatterns = [
    path("workspace/create", workspaces.WorkspaceCreate.as_view()),
    path("workspace/describe", workspaces.WorkspaceDescribe.as_view()),
    path("workspace/list", workspaces.WorkspaceList.as_view()),
    path("workspace/update", workspaces.WorkspaceUpdate.as_view()),
    path("workspace/delete", workspaces.WorkspaceDelete.as_view()),
    path("projects/create", projects.ProjectCreate.as_view()),
    path("projects/describe", projects.ProjectDescribe.as_view()),
    path("projects/list", projects.ProjectList.as_view()),
    path("projects/update", projects.ProjectUpdate.as_view()),
    path("projects/delete", projects.ProjectDelete.as_view()),
]
