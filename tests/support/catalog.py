"""The gettext catalog template of pactmw's pages, extracted with Babel from the templates and
from the messages the Provider passes to them (`ConsentRefused(...)` and its `SignInReused(...)`,
`pages.translate(...)`)."""

from __future__ import annotations

import io
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.pofile import write_po

from tests.support.servers import REPO

__all__ = ["POT", "TEMPLATES", "extracted_pot"]

PROVIDER = REPO / "src" / "pactmw" / "provider"
TEMPLATES = PROVIDER / "templates"
#: Where the Python code hands the pages a message: its first argument, a literal.
KEYWORDS = {**DEFAULT_KEYWORDS, "ConsentRefused": (1,), "SignInReused": (1,), "translate": (1,)}
POT = REPO / "src" / "pactmw" / "provider" / "locale" / "pactmw.pot"


def extracted_pot(templates: Path = TEMPLATES) -> str:
    """The .pot text of every translatable string in `templates` and in the Provider's
    messages to the pages (no dates: reproducible)."""
    catalog = Catalog(project="pactmw", domain="pactmw", fuzzy=False)
    sources = [
        (templates, [("**.html", "jinja2.ext.babel_extract")], ""),
        (PROVIDER, [("**/templates/**", "ignore"), ("**.py", "python")], "pactmw/provider/"),
    ]
    for folder, methods, prefix in sources:
        for filename, lineno, message, comments, _ in extract_from_dir(
            str(folder),
            methods,
            options_map={"**.html": {"extensions": "jinja2.ext.i18n"}},
            keywords=KEYWORDS,
        ):
            location = prefix + filename
            catalog.add(message, None, [(location, lineno)], auto_comments=comments)
    buffer = io.BytesIO()
    write_po(buffer, catalog, omit_header=True, sort_output=True, width=99)
    return buffer.getvalue().decode("utf-8")


if __name__ == "__main__":  # python -m tests.support.catalog: refresh the shipped .pot
    POT.write_text(extracted_pot())
