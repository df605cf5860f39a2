"""Thin framework glue: ASGI (Starlette/FastAPI), WSGI (Werkzeug), Django, Flask."""

#: The API is in the submodules; the package itself exports no names.
__all__: list[str] = []
