from typing import Any

from django.core.management.base import CommandError

from iam.platform.service_helpers import ServiceCommand
from sso import services
from sso.models import SsoDomain
from tenancy.workspace_cache import find_workspace


class Command(ServiceCommand):
    help = (
        "Verifies an SSO connection's domain by an operator's word, without the DNS proof: "
        "--workspace <id or slug> --domain <domain>. A domain another workspace verified stays theirs."
    )
    required = ("--workspace", "--domain")

    def run(self, **options: Any) -> None:
        workspace = find_workspace(options["workspace"])
        if workspace is None:
            raise CommandError("workspace not found")
        domain = options["domain"].strip().lower().rstrip(".")
        row = (
            SsoDomain.objects.select_related("connection").filter(workspace=workspace, domain=domain).first()
        )
        if row is None:
            raise CommandError("domain not found")
        services.verify_domain(row.connection, domain, actor=None, by=services.BY_OPERATOR)
        self.stdout.write(f"{domain} verified for {workspace.slug}")
