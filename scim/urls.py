from django.urls import path, re_path

from . import api, views

# The SCIM service of each workspace (RFC 7644): `/scim/v2/<workspace id>/...`. A directory configured
# with the base URL and a trailing slash sends `//Users`: extra slashes are accepted.
SCIM = r"^scim/v2/(?P<workspace_id>[^/]+)/+"

urlpatterns = [
    path("scim-tokens/create", api.ScimTokenCreate.as_view()),
    path("scim-tokens/list", api.ScimTokenList.as_view()),
    path("scim-tokens/delete", api.ScimTokenDelete.as_view()),
    re_path(SCIM + r"Users/?$", views.Users.as_view()),
    re_path(SCIM + r"Users/\.search/?$", views.Users.as_view(search=True)),
    re_path(SCIM + r"Users/(?P<resource_id>[^/]+)/?$", views.UserDetail.as_view()),
    re_path(SCIM + r"Groups/?$", views.Groups.as_view()),
    re_path(SCIM + r"Groups/\.search/?$", views.Groups.as_view(search=True)),
    re_path(SCIM + r"Groups/(?P<resource_id>[^/]+)/?$", views.GroupDetail.as_view()),
    re_path(SCIM + r"ServiceProviderConfig/?$", views.ServiceProviderConfigView.as_view()),
    re_path(SCIM + r"ResourceTypes/?$", views.ResourceTypes.as_view()),
    re_path(SCIM + r"ResourceTypes/(?P<name>[^/]+)/?$", views.ResourceTypes.as_view()),
    re_path(SCIM + r"Schemas/?$", views.Schemas.as_view()),
    re_path(SCIM + r"Schemas/(?P<urn>[^/]+)/?$", views.Schemas.as_view()),
    re_path(SCIM + r"(?P<rest>.*)$", views.Unknown.as_view()),
]
