import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def from_audit_log(apps, schema_editor) -> None:
    """The creator of each existing workspace, as its `workspace.create` entry in the audit log names it
    (an account's request; an operator's or a command's creation counts against no account's quota)."""
    Workspace = apps.get_model("tenancy", "Workspace")
    Account = apps.get_model("accounts", "Account")
    AuditEntry = apps.get_model("iam", "AuditEntry")
    creators = AuditEntry.objects.filter(
        action="workspace.create",
        actor_kind="account",
        resource_id=models.OuterRef("pk"),
        actor_id__in=Account.objects.values("pk"),
    ).values("actor_id")[:1]
    Workspace.objects.filter(created_by__isnull=True).update(created_by_id=models.Subquery(creators))


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0002_relations_from_abstract_bases"),
        ("iam", "0003_audit_entry"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="workspace",
            name="created_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(from_audit_log, migrations.RunPython.noop),
    ]
