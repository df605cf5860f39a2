"""The admin's label of a registered agent's `jwks_uri` (no change to the table)."""

from django.db import migrations, models

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [  # noqa: RUF012 (Django's own shape)
        ("pactmw", "0002_operations"),
    ]

    operations = [  # noqa: RUF012 (Django's own shape)
        migrations.AlterField(
            model_name="registeredagent",
            name="jwks_uri",
            field=models.TextField(verbose_name="JWKS URL"),
        ),
    ]
