from django.contrib import admin
from django.urls import include, path

from iam import metrics, views
from iam.api import routes

# Patterns are tried in order: `clients/validate`, which every client service calls on every request it
# serves, comes first.
urlpatterns = [
    path("", include("clients.urls")),
    path("", views.Index.as_view()),
    path("health-check", views.HealthCheck.as_view()),
    path("metrics", metrics.metrics_view),
    *routes(views),
    path("admin/", admin.site.urls),
    path("", include("authn.urls")),
    path("", include("rbac.urls")),
    path("", include("sso.urls")),
]
