"""The shop's orders."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Order(models.Model):
    class Status(models.TextChoices):
        PROCESSING = "processing", "Processing"
        SHIPPED = "shipped", "Shipped"
        DELIVERED = "delivered", "Delivered"

    number = models.CharField(max_length=16, unique=True)
    item = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PROCESSING)
    eta = models.CharField("expected arrival", max_length=50, blank=True)
    return_requested = models.BooleanField(default=False)
    #: The customer who placed the order (a `django.contrib.auth` user); None for guests.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="orders",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("number",)

    def __str__(self) -> str:
        return self.number

    def describe(self) -> str:
        """One sentence about the order, for people and for the bot."""
        if self.status == self.Status.DELIVERED:
            return f"Order {self.number} ({self.item}) was delivered."
        return f"Order {self.number} ({self.item}) is {self.status}; it should arrive {self.eta}."

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "item": self.item,
            "status": self.status,
            "eta": self.eta,
            "return_requested": self.return_requested,
        }
