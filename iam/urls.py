from django.contrib import admin
from django.urls import include, path

from iam import views

urlpatterns = [
    path("", views.Index.as_view()),
    path("health-check", views.HealthCheck.as_view()),
    path("admin/", admin.site.urls),
    path("", include("authn.urls")),
    path("", include("accounts.urls")),
    path("", include("tenancy.urls")),
    path("", include("rbac.urls")),
    path("", include("clients.urls")),
]
