"""docs/api.md#invitations: memberships record the account's consent. Memberships that are active or suspended
today were in force before the rule: they count as accepted when they were made; invited ones stay open."""

from django.db import migrations, models
from django.db.models import F


def accept_existing(apps, schema_editor):
    Membership = apps.get_model("rbac", "Membership")
    Membership.objects.exclude(status="invited").update(accepted_at=F("created_at"))


class Migration(migrations.Migration):
    dependencies = [("rbac", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="membership", name="accepted_at", field=models.DateTimeField(blank=True, null=True)
        ),
        migrations.RunPython(accept_existing, migrations.RunPython.noop),
    ]
