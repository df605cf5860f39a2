"""Django migrations of the pactmw app: the tables of `store = "django"`."""

__all__: list[str] = []
