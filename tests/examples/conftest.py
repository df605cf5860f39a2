"""The `shop` fixture (an example shop serving the Delegated profile) for this folder's tests;
it lives in tests/examples/support.py, which the browser tests import it from too."""

from tests.examples.support import shop

__all__ = ["shop"]
