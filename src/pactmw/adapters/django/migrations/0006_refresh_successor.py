"""The sealed answer a spent refresh token repeats within the reuse interval (schema version 9
of sqlite.py/postgres.py)."""

from django.db import migrations, models

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [  # noqa: RUF012 (Django's own shape)
        ("pactmw", "0005_messages_answered"),
    ]

    operations = [  # noqa: RUF012 (Django's own shape)
        migrations.AddField(
            model_name="refreshtoken",
            name="successor",
            field=models.BinaryField(blank=True, editable=False, null=True),
        ),
    ]
