import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.models import Account, normalize_email
from authn import tokens


class Command(BaseCommand):
    help = (
        "Prints a fresh access token (valid 60 minutes, docs/security.md) for the enabled account E, for "
        "operators' scripts and support. The token ends with the account's sessions like any other."
    )

    def add_arguments(self, parser):
        parser.add_argument("--email", required=True, help="the account's e-mail address")

    def handle(self, *args, email: str, **options):
        account = Account.objects.filter(email=normalize_email(email)).first()
        if account is None:
            raise CommandError(f"no account with e-mail {email}")
        if not account.enabled:
            raise CommandError(f"account {account.email} is disabled")
        token, _ = tokens.issue(
            account.pk,
            type=tokens.ACCESS,
            session_version=account.session_version,
            lifetime=settings.IAM_ACCESS_TOKEN_LIFETIME,
            auth_time=int(time.time()),  # the command is the login of this one-token session
        )
        self.stdout.write(token)
