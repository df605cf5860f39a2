"""Django management commands of the pactmw app (`manage.py pactmw ...`)."""

__all__: list[str] = []
