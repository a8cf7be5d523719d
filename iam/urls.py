from django.contrib import admin
from django.urls import include, path

from iam.http import docs, pages, views
from iam.platform import metrics

# Each app's admin module registers its models and the operators' sign-in here, with the URLs that serve
# them (iam/apps.py: not at every process's start).
admin.autodiscover()

# Patterns are tried in order: `clients/validate`, which every client service calls on every request it
# serves, comes first, and the OpenID Provider's token endpoint next (the ~150 patterns before it cost a
# code exchange about 50 us: docs/performance.md#latest-figures).
urlpatterns = [
    path("", include("clients.urls")),
    path("", include("oidc.urls")),
    path("", views.Index.as_view()),
    path("health-check", views.HealthCheck.as_view()),
    path("metrics", metrics.metrics_view),
    # The API reference: Swagger UI over the OpenAPI schema that the endpoints' declarations generate.
    path("docs", docs.ApiReference.as_view()),
    path("docs/schema", docs.ApiSchema.as_view(), name="openapi-schema"),
    path("audit/list", views.AuditList.as_view()),
    path("admin/", admin.site.urls),
    path("pages/accent/<str:color>.css", pages.accent_stylesheet),  # docs/pages.md#branding
    path("", include("authn.urls")),
    path("", include("accounts.urls")),
    path("", include("tenancy.urls")),
    path("", include("rbac.urls")),
    path("", include("sso.urls")),
    path("", include("scim.urls")),
]
