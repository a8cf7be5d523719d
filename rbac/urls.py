from django.urls import path

from . import api, workspaces

urlpatterns = [
    path("workspace/create", workspaces.WorkspaceCreate.as_view()),
    path("workspace/describe", workspaces.WorkspaceDescribe.as_view()),
    path("workspace/list", workspaces.WorkspaceList.as_view()),
    path("workspace/update", workspaces.WorkspaceUpdate.as_view()),
    path("workspace/delete", workspaces.WorkspaceDelete.as_view()),
    path("projects/create", workspaces.ProjectCreate.as_view()),
    path("projects/describe", workspaces.ProjectDescribe.as_view()),
    path("projects/list", workspaces.ProjectList.as_view()),
    path("projects/update", workspaces.ProjectUpdate.as_view()),
    path("projects/delete", workspaces.ProjectDelete.as_view()),
    path("permissions/create", api.PermissionCreate.as_view()),
    path("permissions/describe", api.PermissionDescribe.as_view()),
    path("permissions/list", api.PermissionList.as_view()),
    path("permissions/update", api.PermissionUpdate.as_view()),
    path("permissions/delete", api.PermissionDelete.as_view()),
    path("permissions/check", api.PermissionCheck.as_view()),
    path("roles/create", api.RoleCreate.as_view()),
    path("roles/describe", api.RoleDescribe.as_view()),
    path("roles/list", api.RoleList.as_view()),
    path("roles/update", api.RoleUpdate.as_view()),
    path("roles/delete", api.RoleDelete.as_view()),
    path("memberships/create", api.MembershipCreate.as_view()),
    path("memberships/describe", api.MembershipDescribe.as_view()),
    path("memberships/list", api.MembershipList.as_view()),
    path("memberships/update", api.MembershipUpdate.as_view()),
    path("memberships/delete", api.MembershipDelete.as_view()),
]
