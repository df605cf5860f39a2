"""Examples: a small support bot wrapped by pactmw in Flask, Django and `pactmw serve`."""
