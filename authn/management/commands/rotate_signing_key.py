from authn import services
from iam.platform.service_helpers import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Creates a new signing key that signs from now on, for RS256 (the key the service always has) and "
        "for IAM_JWT_ALGORITHM when it is EdDSA or ES256. The previous keys stay published in "
        "/.well-known/jwks.json until the tokens they signed have expired (IAM_REFRESH_TOKEN_DAYS), then "
        "drop out. Prints the new key ids."
    )

    def run(self, **options):
        for key in services.rotate_signing_key():
            self.stdout.write(f"new signing key {key.kid} ({key.algorithm})")
