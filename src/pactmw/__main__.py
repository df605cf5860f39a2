"""`python -m pactmw`: the `pactmw` command."""

from pactmw.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
