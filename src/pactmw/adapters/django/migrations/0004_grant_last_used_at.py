"""When a grant was last used (schema version 7 of sqlite.py/postgres.py): the connected
agents page's "last used", written at most once a minute per grant."""

from django.db import migrations, models

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [  # noqa: RUF012 (Django's own shape)
        ("pactmw", "0003_poppy"),
    ]

    operations = [  # noqa: RUF012 (Django's own shape)
        migrations.AddField(
            model_name="grant",
            name="last_used_at",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
