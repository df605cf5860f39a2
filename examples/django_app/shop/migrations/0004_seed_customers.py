"""Seed two demo customers who own the demo orders, so delegation has someone to act for.

DEV ONLY: the passwords are published in the README (jane / jane-dev-only, alex /
alex-dev-only). Never run this against a database real people use.
"""

from django.contrib.auth.hashers import make_password
from django.db import migrations

DEMO_CUSTOMERS = [
    # username, email, password (dev only), the orders they placed
    ("jane", "jane@example.com", "jane-dev-only", ["A-1001", "A-1003"]),
    ("alex", "alex@example.com", "alex-dev-only", ["A-1002"]),
]


def seed(apps, schema_editor):
    User = apps.get_model("auth", "User")
    Order = apps.get_model("shop", "Order")
    for username, email, password, orders in DEMO_CUSTOMERS:
        user, created = User.objects.get_or_create(username=username, defaults={"email": email})
        if created:
            user.password = make_password(password)
            user.save(update_fields=["password"])
        Order.objects.filter(number__in=orders, owner__isnull=True).update(owner=user)


def unseed(apps, schema_editor):
    User = apps.get_model("auth", "User")
    User.objects.filter(username__in=[c[0] for c in DEMO_CUSTOMERS]).delete()


class Migration(migrations.Migration):
    dependencies = [("shop", "0003_order_owner"), ("auth", "0012_alter_user_first_name_max_length")]

    operations = [migrations.RunPython(seed, unseed)]
