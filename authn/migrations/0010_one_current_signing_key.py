# One current signing key per algorithm, so two processes that create the first key at once end with
# one (authn/keys.py). Before the constraint, an algorithm that two racing processes gave two current
# keys keeps its newest; the others are retired, and stay published until their tokens have expired.

from django.db import migrations, models
from django.utils import timezone


def retire_all_but_the_newest(apps, schema_editor):
    SigningKey = apps.get_model("authn", "SigningKey")
    current = SigningKey.objects.filter(retired_at__isnull=True).order_by("algorithm", "-created_at")
    kept = set()
    for key in current:
        if key.algorithm in kept:
            SigningKey.objects.filter(pk=key.pk).update(retired_at=timezone.now())
        kept.add(key.algorithm)


class Migration(migrations.Migration):

    dependencies = [
        ('authn', '0009_session_sso_workspace'),
    ]

    operations = [
        migrations.RunPython(retire_all_but_the_newest, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='signingkey',
            constraint=models.UniqueConstraint(condition=models.Q(('retired_at__isnull', True)), fields=('algorithm',), name='signing_key_one_current'),
        ),
    ]
