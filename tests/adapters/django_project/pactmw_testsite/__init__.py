"""A minimal Django project serving the adapter tests (under runserver and under uvicorn)."""
