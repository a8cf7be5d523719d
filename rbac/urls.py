from django.urls import path

from . import api, invitation_endpoints

urlpatterns = [
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
    path("invitations/create", api.InvitationCreate.as_view()),
    path("invitations/describe", api.InvitationDescribe.as_view()),
    path("invitations/list", api.InvitationList.as_view()),
    path("invitations/revoke", api.InvitationRevoke.as_view()),
    # Answered by the invitee: no X-Workspace, no permission (CONTRACT 15)
    path("memberships/accept", invitation_endpoints.MembershipAccept.as_view()),
    path("memberships/decline", invitation_endpoints.MembershipDecline.as_view()),
    path("invitations/accept", invitation_endpoints.InvitationAccept.as_view()),
    path("invitations/decline", invitation_endpoints.InvitationDecline.as_view()),
    path("invitations/mine", invitation_endpoints.InvitationMine.as_view()),
]
