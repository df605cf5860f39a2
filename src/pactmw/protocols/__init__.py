"""Protocol logic: PACT identity, PACT delegation, Parafé. Pure, framework-free."""
