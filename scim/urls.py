from django.urls import path, re_path

from .api import discovery, endpoint, groups, tokens, users

# The SCIM service of each workspace (RFC 7644): `/scim/v2/<workspace id>/...`. A directory configured
# with the base URL and a trailing slash sends `//Users`: extra slashes are accepted.
SCIM = r"^scim/v2/(?P<workspace_id>[^/]+)/+"

urlpatterns = [
    path("scim-tokens/create", tokens.ScimTokenCreate.as_view()),
    path("scim-tokens/list", tokens.ScimTokenList.as_view()),
    path("scim-tokens/delete", tokens.ScimTokenDelete.as_view()),
    re_path(SCIM + r"Users/?$", users.Users.as_view()),
    re_path(SCIM + r"Users/\.search/?$", users.Users.as_view(search=True)),
    re_path(SCIM + r"Users/(?P<resource_id>[^/]+)/?$", users.UserDetail.as_view()),
    re_path(SCIM + r"Groups/?$", groups.Groups.as_view()),
    re_path(SCIM + r"Groups/\.search/?$", groups.Groups.as_view(search=True)),
    re_path(SCIM + r"Groups/(?P<resource_id>[^/]+)/?$", groups.GroupDetail.as_view()),
    re_path(SCIM + r"ServiceProviderConfig/?$", discovery.ServiceProviderConfigView.as_view()),
    re_path(SCIM + r"ResourceTypes/?$", discovery.ResourceTypes.as_view()),
    re_path(SCIM + r"ResourceTypes/(?P<name>[^/]+)/?$", discovery.ResourceTypes.as_view()),
    re_path(SCIM + r"Schemas/?$", discovery.Schemas.as_view()),
    re_path(SCIM + r"Schemas/(?P<urn>[^/]+)/?$", discovery.Schemas.as_view()),
    re_path(SCIM + r"(?P<rest>.*)$", endpoint.Unknown.as_view()),
]
