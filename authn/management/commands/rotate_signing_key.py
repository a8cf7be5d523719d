from django.core.management.base import BaseCommand, CommandError

from authn import services
from iam.errors import ApiError


class Command(BaseCommand):
    help = (
        "With IAM_JWT_ALGORITHM EdDSA or ES256: creates a new signing key that signs every token from now "
        "on. The previous keys stay published in /.well-known/jwks.json until the tokens they signed have "
        "expired (IAM_REFRESH_TOKEN_DAYS), then drop out. Prints the new key id."
    )

    def handle(self, *args, **options):
        try:
            key = services.rotate_signing_key()
        except ApiError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"new signing key {key.kid} ({key.algorithm})")
