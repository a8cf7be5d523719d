from django.contrib.auth.backends import ModelBackend

from accounts.models import normalize_email
from iam.platform.addresses import client_ip

from . import throttling


class AccountBackend(ModelBackend):
    """The admin's sign-in: e-mail and password of an enabled account whose password credential is not
    revoked (docs/api.md#authorization). ModelBackend already runs the hasher for unknown e-mails, for equal
    timing. The docs/api.md#throttling failed-login limits count here too, in the same windows as
    `/auth/login`: the admin is no side door for guessing an operator's password."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        email = normalize_email(username or "")
        ip = client_ip(request) if request is not None else ""
        if throttling.login_failures_by_email.retry_after(email) or (
            ip and throttling.login_failures_by_ip.retry_after(ip)
        ):
            return None  # refused without verifying the password, as the API does
        account = super().authenticate(request, username=username, password=password, **kwargs)
        if account is None:
            throttling.login_failures_by_email.hit(email)
            if ip:
                throttling.login_failures_by_ip.hit(ip)
        else:
            throttling.login_failures_by_email.reset(email)
        return account

    def user_can_authenticate(self, user) -> bool:
        from authn.models import Credential

        if not user.enabled:
            return False
        return not Credential.objects.filter(
            account=user, kind=Credential.Kind.PASSWORD, status=Credential.Status.REVOKED
        ).exists()
