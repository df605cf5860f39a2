"""Seed the demo orders, so a fresh database has something to ask about."""

from django.db import migrations

DEMO_ORDERS = [
    {"number": "A-1001", "item": "walnut desk lamp", "status": "shipped", "eta": "Thursday"},
    {"number": "A-1002", "item": "linen throw", "status": "processing", "eta": "next Monday"},
    {"number": "A-1003", "item": "ceramic mug set", "status": "delivered", "eta": ""},
]


def seed(apps, schema_editor):
    Order = apps.get_model("shop", "Order")
    for fields in DEMO_ORDERS:
        Order.objects.get_or_create(number=fields["number"], defaults=fields)


def unseed(apps, schema_editor):
    Order = apps.get_model("shop", "Order")
    Order.objects.filter(number__in=[o["number"] for o in DEMO_ORDERS]).delete()


class Migration(migrations.Migration):
    dependencies = [("shop", "0001_initial")]

    operations = [migrations.RunPython(seed, unseed)]
