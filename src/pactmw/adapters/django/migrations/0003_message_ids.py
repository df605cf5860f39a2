"""The message ids each owner holds across its conversations (a Poppy message id is the
User's, PAP-7.3-01): schema version 12 of sqlite.py/postgres.py, filled from the stored
Poppy conversations as there."""

from django.db import migrations, models

from pactmw.store._sql.migrations import MESSAGE_IDS_BACKFILL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [  # noqa: RUF012 (Django's own shape)
        ("pactmw", "0002_operations"),
    ]

    operations = [  # noqa: RUF012 (Django's own shape)
        migrations.CreateModel(
            name="MessageId",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("brand_id", models.TextField(verbose_name="brand")),
                ("issuer", models.TextField(verbose_name="agent")),
                ("sub", models.TextField(verbose_name="agent's user (sub)")),
                ("message_id", models.TextField()),
                ("context_id", models.TextField()),
            ],
            options={
                "db_table": "pactmw_message_ids",
                "indexes": [models.Index(fields=["context_id"], name="pactmw_message_ids_context")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("brand_id", "issuer", "sub", "message_id"),
                        name="pactmw_message_ids_key",
                    )
                ],
            },
        ),
        # Nothing to undo on the way back: the table goes with the model.
        migrations.RunSQL(MESSAGE_IDS_BACKFILL, migrations.RunSQL.noop),
    ]
