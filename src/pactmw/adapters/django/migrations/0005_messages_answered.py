"""The answered-turns index of `history` (schema version 8 of sqlite.py/postgres.py)."""

from django.db import migrations, models

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [  # noqa: RUF012 (Django's own shape)
        ("pactmw", "0004_grant_last_used_at"),
    ]

    operations = [  # noqa: RUF012 (Django's own shape)
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(reply__isnull=False),
                fields=["conversation", "id"],
                name="pactmw_messages_answered",
            ),
        ),
    ]
