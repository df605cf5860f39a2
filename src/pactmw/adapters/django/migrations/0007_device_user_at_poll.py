"""A Poppy device authorization names no user until its poll binds one: `pa_sub` may be
NULL (schema version 10 of sqlite.py/postgres.py)."""

from django.db import migrations, models

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [  # noqa: RUF012 (Django's own shape)
        ("pactmw", "0006_refresh_successor"),
    ]

    operations = [  # noqa: RUF012 (Django's own shape)
        migrations.AlterField(
            model_name="deviceauthorization",
            name="pa_sub",
            field=models.TextField(blank=True, null=True),
        ),
    ]
