"""Acme Lamp Co.'s existing Flask support site, wrapped by pactmw (see README.md)."""
