from accounts.models import Account, normalize_email
from accounts.services import set_operator, update_account
from authn.credentials import update_credential
from authn.models import Credential
from authn.services import create_password_account
from iam.platform.service_helpers import ServiceCommand
from rbac.services.workspaces import ensure_owner
from tenancy.workspace_cache import root_workspace


class Command(ServiceCommand):
    help = (
        "Creates the root workspace, its `*` permission and `owner` role, and the operator account E "
        "with its active owner membership (docs/operations.md). Idempotent: what exists is kept; an existing "
        "account is made an operator but keeps its password."
    )
    required = ("--email", "--password")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--name", default="Operator")

    def run(self, *, email: str, password: str, name: str, **options):
        workspace = root_workspace()
        self.stdout.write(f"root workspace: {workspace.slug} ({workspace.pk})")
        account = Account.objects.filter(email=normalize_email(email)).first()
        if account is None:
            account = create_password_account(email=email, password=password, name=name)
            self.stdout.write(f"created operator {account.email} ({account.pk})")
        else:
            self.stdout.write(f"found account {account.email} ({account.pk})")
        # Through the services: each change is recorded (actor kind `command`), purged from the caches and
        # heard by the clients (docs/integration.md#push-events).
        if flags := {name: True for name in ("verified", "enabled") if not getattr(account, name)}:
            update_account(account, **flags, actor=None)
        set_operator(account, operator=True, actor=None)
        for credential in Credential.objects.filter(account=account, kind=Credential.Kind.PASSWORD).exclude(
            status=Credential.Status.ACTIVE
        ):
            update_credential(credential, status=Credential.Status.ACTIVE)
        ensure_owner(workspace, account)
        self.stdout.write(f"{account.email} is an operator and owner of {workspace.slug}")
