from authn import services
from iam.service_helpers import ServiceCommand


class Command(ServiceCommand):
    help = (
        "With IAM_JWT_ALGORITHM EdDSA or ES256: creates a new signing key that signs every token from now "
        "on. The previous keys stay published in /.well-known/jwks.json until the tokens they signed have "
        "expired (IAM_REFRESH_TOKEN_DAYS), then drop out. Prints the new key id."
    )

    def run(self, **options):
        key = services.rotate_signing_key()
        self.stdout.write(f"new signing key {key.kid} ({key.algorithm})")
