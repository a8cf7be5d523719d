from django.apps import AppConfig


class IamConfig(AppConfig):
    name = "iam"
    verbose_name = "IAM platform"
