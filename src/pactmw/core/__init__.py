"""Pure building blocks: encodings, JOSE, keys, errors, the neutral HTTP model."""

#: The API is in the submodules; the package itself exports no names.
__all__: list[str] = []
