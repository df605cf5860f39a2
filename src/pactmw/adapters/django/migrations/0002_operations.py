"""Poppy operations and API write answers kept under their Idempotency-Key (Operations
v1): schema version 11 of sqlite.py/postgres.py."""

from django.db import migrations, models

import pactmw.adapters.django.models

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [  # noqa: RUF012 (Django's own shape)
        ("pactmw", "0001_initial"),
    ]

    operations = [  # noqa: RUF012 (Django's own shape)
        migrations.CreateModel(
            name="PoppyIdempotentAnswer",
            fields=[
                ("record_key", models.TextField(primary_key=True, serialize=False)),
                ("fingerprint", models.TextField()),
                ("status", models.IntegerField()),
                ("body", models.TextField()),
                ("expires_at", models.FloatField()),
            ],
            options={
                "db_table": "pactmw_poppy_idempotency",
            },
        ),
        migrations.CreateModel(
            name="PoppyOperation",
            fields=[
                ("operation_id", models.TextField(primary_key=True, serialize=False)),
                ("brand_id", models.TextField()),
                ("client_id", models.TextField()),
                ("user_id", models.TextField()),
                ("account", models.TextField(blank=True, null=True)),
                ("action", models.TextField()),
                ("revision", models.IntegerField()),
                ("state", models.TextField()),
                ("summary", models.TextField()),
                ("terms", models.TextField(blank=True, null=True)),
                ("scopes", pactmw.adapters.django.models.ScopeListField()),
                ("user_approval_required", models.IntegerField()),
                ("url", models.TextField(blank=True, null=True)),
                ("open_key", models.TextField(blank=True, null=True)),
                ("created_at", models.FloatField()),
                ("updated_at", models.FloatField()),
                ("expires_at", models.FloatField()),
                ("confirmed_revision", models.IntegerField(blank=True, null=True)),
                ("approved_by", models.TextField(blank=True, null=True)),
                ("confirmed_at", models.FloatField(blank=True, null=True)),
                ("result_summary", models.TextField(blank=True, null=True)),
                ("result_data", models.TextField(blank=True, null=True)),
            ],
            options={
                "db_table": "pactmw_poppy_operations",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("open_key",), name="pactmw_poppy_operations_open"
                    )
                ],
            },
        ),
    ]
