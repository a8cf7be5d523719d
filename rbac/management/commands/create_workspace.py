from django.core.management.base import CommandError

from accounts.models import Account, normalize_email
from iam.http.fields import SLUG_RE
from iam.platform.service_helpers import ServiceCommand
from rbac.services.workspaces import create_workspace, ensure_owner
from tenancy.models import Workspace

META = {"schema_version": "1"}


class Command(ServiceCommand):
    help = (
        "Creates workspace S named N owned by the existing account E, with the owner set-up of "
        "`workspace/create` (docs/operations.md#the-admin-and-management-commands). Idempotent: an existing "
        "workspace S keeps its name and gains E as "
        "owner."
    )
    required = ("--slug", "--name", "--owner-email")

    def run(self, *, slug: str, name: str, owner_email: str, **options):
        if not SLUG_RE.fullmatch(slug):
            raise CommandError(f"invalid slug: {slug}")
        owner = Account.objects.filter(email=normalize_email(owner_email)).first()
        if owner is None:
            raise CommandError(f"no account with e-mail {owner_email}")
        workspace = Workspace.objects.filter(slug=slug).first()
        created = workspace is None
        if created:
            # Through the service: recorded as the command's, with the owner set-up of `workspace/create`.
            workspace = create_workspace(
                name=name, slug=slug, config=dict(META), tags=[], meta=dict(META), owner=owner, actor=None
            )
        else:
            ensure_owner(workspace, owner)
        verb = "created" if created else "found"
        self.stdout.write(f"{verb} workspace {workspace.slug} ({workspace.pk}), owner {owner.email}")
