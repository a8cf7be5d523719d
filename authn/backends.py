from django.contrib.auth.backends import ModelBackend


class AccountBackend(ModelBackend):
    """The admin's sign-in: e-mail and password of an enabled account whose password credential is not
    revoked (CONTRACT 4). ModelBackend already runs the hasher for unknown e-mails, for equal timing."""

    def user_can_authenticate(self, user) -> bool:
        from authn.models import Credential

        if not user.enabled:
            return False
        return not Credential.objects.filter(
            account=user, kind=Credential.Kind.PASSWORD, status=Credential.Status.REVOKED
        ).exists()
