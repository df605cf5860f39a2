"""The adversarial regression suite: one file per attack class, each test named for its attack.

SECURITY.md states what each check defends against; these tests attack those claims from
outside, through the public entry points (the verifiers, `Provider.handle` and real uvicorn
servers), with tokens forged byte by byte. A security bug gets its regression test in a file
named for it (`test_unicode_digits_in_http_headers.py`), as PyJWT keeps `test_advisory.py`.
Shared forging and serving helpers live in `tests.advisories.support`.
"""
