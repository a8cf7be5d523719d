"""docs/api.md#the-root-workspace: credentials live in the root workspace only. An earlier version let
`X-Workspace` on register and the OAuth initiate choose the credential's workspace, which handed the
owner of that workspace `credentials/update` over someone else's account. Every credential moves to the
root workspace, and OAuth states no longer carry a workspace."""

from django.conf import settings
from django.db import migrations


def move_to_root(apps, schema_editor):
    Credential = apps.get_model("authn", "Credential")
    Workspace = apps.get_model("tenancy", "Workspace")
    if not Credential.objects.exists():
        return
    root, _ = Workspace.objects.get_or_create(
        slug=settings.IAM_ROOT_WORKSPACE, defaults={"name": "Root", "config": {"schema_version": "1"}}
    )
    Credential.objects.exclude(workspace=root).update(workspace=root)


class Migration(migrations.Migration):
    dependencies = [
        ("authn", "0002_oauth_state"),
        ("tenancy", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(move_to_root, migrations.RunPython.noop),
        migrations.RemoveField(model_name="oauthstate", name="workspace"),
    ]
