"""Pure building blocks: encodings, JOSE, keys, errors, the neutral HTTP model."""
