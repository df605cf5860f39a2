"""Thin framework glue: ASGI (Starlette/FastAPI), WSGI (Werkzeug), Django, Flask."""
