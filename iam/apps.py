from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class IamConfig(AppConfig):
    name = "iam"
    verbose_name = "IAM platform"


class IamAdminConfig(admin_apps.AdminConfig):
    """Django's admin with the operators' site (`iam.sites.IamAdminSite`)."""

    default = False  # `iam` itself is IamConfig
    default_site = "iam.sites.IamAdminSite"
