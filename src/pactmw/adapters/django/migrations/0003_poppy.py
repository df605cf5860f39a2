"""Poppy Sessions and Account Tokens (schema version 6 of sqlite.py/postgres.py)."""

import django.db.models.deletion
from django.db import migrations, models

import pactmw.adapters.django.models

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [  # noqa: RUF012 (Django's own shape)
        ("pactmw", "0002_rate_counters"),
    ]

    operations = [  # noqa: RUF012 (Django's own shape)
        migrations.CreateModel(
            name="PoppySession",
            fields=[
                ("session_id", models.TextField(primary_key=True, serialize=False)),
                ("brand_id", models.TextField()),
                ("client_id", models.TextField()),
                ("user_id", models.TextField()),
                ("jkt", models.TextField()),
                ("token_hash", models.TextField(unique=True)),
                ("token_expires_at", models.FloatField()),
                ("created_at", models.FloatField()),
                ("account", models.TextField(blank=True, null=True)),
                ("grant_id", models.TextField(blank=True, null=True)),
                ("scopes", pactmw.adapters.django.models.ScopeListField()),
                ("ever_account", models.TextField(blank=True, null=True)),
                ("signed_in_at", models.FloatField(blank=True, null=True)),
            ],
            options={
                "db_table": "pactmw_poppy_sessions",
                "indexes": [models.Index(fields=["grant_id"], name="pactmw_poppy_sessions_grant")],
            },
        ),
        migrations.CreateModel(
            name="PoppyAccountToken",
            fields=[
                ("token_hash", models.TextField(primary_key=True, serialize=False)),
                ("brand_id", models.TextField()),
                ("client_id", models.TextField()),
                ("scopes", pactmw.adapters.django.models.ScopeListField()),
                ("created_at", models.FloatField()),
                ("expires_at", models.FloatField()),
                ("used_at", models.FloatField(blank=True, null=True)),
                (
                    "grant",
                    models.ForeignKey(
                        db_column="grant_id",
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        to="pactmw.grant",
                    ),
                ),
            ],
            options={
                "db_table": "pactmw_poppy_account_tokens",
                "indexes": [models.Index(fields=["grant"], name="pactmw_poppy_act_tokens_grant")],
            },
        ),
    ]
