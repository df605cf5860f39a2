"""Rate-limit counters shared through the store (schema version 5 of sqlite.py/postgres.py)."""

from django.db import migrations, models

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [  # noqa: RUF012 (Django's own shape)
        ("pactmw", "0001_initial"),
    ]

    operations = [  # noqa: RUF012 (Django's own shape)
        migrations.CreateModel(
            name="RateCounter",
            fields=[
                ("counter_key", models.TextField(primary_key=True, serialize=False)),
                ("window_start", models.FloatField()),
                ("window_end", models.FloatField()),
                ("requests", models.IntegerField()),
            ],
            options={
                "db_table": "pactmw_rate_counters",
                "indexes": [models.Index(fields=["window_end"], name="pactmw_rate_counters_end")],
            },
        ),
    ]
