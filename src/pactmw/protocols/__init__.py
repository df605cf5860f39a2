"""Protocol logic: PACT identity, PACT delegation, Parafé. Pure, framework-free."""

#: The API is in the submodules; the package itself exports no names.
__all__: list[str] = []
