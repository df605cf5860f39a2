"""Tests of the PACT 1.0 Delegated profile (spec §5, pact-provider.md §5).

Everything that crosses HTTP runs against a real uvicorn server on 127.0.0.1; the helpers in
`tests.delegated.support` act as the personal agent (PACT JWTs signed with their own keys),
as the person in a browser (a cookie the test controls) and as an independent receipt checker.
"""
