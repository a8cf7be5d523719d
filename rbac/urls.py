from django.urls import path

from .api import invitations, memberships, permissions, roles, service_accounts

urlpatterns = [
    path("permissions/create", permissions.PermissionCreate.as_view()),
    path("permissions/describe", permissions.PermissionDescribe.as_view()),
    path("permissions/list", permissions.PermissionList.as_view()),
    path("permissions/update", permissions.PermissionUpdate.as_view()),
    path("permissions/delete", permissions.PermissionDelete.as_view()),
    path("permissions/check", permissions.PermissionCheck.as_view()),
    path("roles/create", roles.RoleCreate.as_view()),
    path("roles/describe", roles.RoleDescribe.as_view()),
    path("roles/list", roles.RoleList.as_view()),
    path("roles/update", roles.RoleUpdate.as_view()),
    path("roles/delete", roles.RoleDelete.as_view()),
    path("memberships/create", memberships.MembershipCreate.as_view()),
    path("memberships/describe", memberships.MembershipDescribe.as_view()),
    path("memberships/list", memberships.MembershipList.as_view()),
    path("memberships/update", memberships.MembershipUpdate.as_view()),
    path("memberships/delete", memberships.MembershipDelete.as_view()),
    path("invitations/create", invitations.InvitationCreate.as_view()),
    path("invitations/describe", invitations.InvitationDescribe.as_view()),
    path("invitations/list", invitations.InvitationList.as_view()),
    path("invitations/revoke", invitations.InvitationRevoke.as_view()),
    path("service-accounts/create", service_accounts.ServiceAccountCreate.as_view()),
    path("service-accounts/describe", service_accounts.ServiceAccountDescribe.as_view()),
    path("service-accounts/list", service_accounts.ServiceAccountList.as_view()),
    path("service-accounts/update", service_accounts.ServiceAccountUpdate.as_view()),
    path("service-accounts/delete", service_accounts.ServiceAccountDelete.as_view()),
    path("service-accounts/create-key", service_accounts.ServiceAccountCreateKey.as_view()),
    path("service-accounts/revoke-key", service_accounts.ServiceAccountRevokeKey.as_view()),
    # Answered by the invitee: no X-Workspace, no permission (docs/api.md#invitations)
    path("memberships/accept", memberships.MembershipAccept.as_view()),
    path("memberships/decline", memberships.MembershipDecline.as_view()),
    path("invitations/accept", invitations.InvitationAccept.as_view()),
    path("invitations/decline", invitations.InvitationDecline.as_view()),
    path("invitations/mine", invitations.InvitationMine.as_view()),
]
