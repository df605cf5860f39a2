from django.contrib import admin

from shop.models import Order


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ("number", "item", "status", "eta", "owner", "return_requested")
    list_filter = ("status", "return_requested")
    search_fields = ("number", "item")
