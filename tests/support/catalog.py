"""The gettext catalog template of pactmw's pages, extracted from the templates with Babel."""

from __future__ import annotations

import io
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import write_po

from tests.support.servers import REPO

__all__ = ["POT", "TEMPLATES", "extracted_pot"]

TEMPLATES = REPO / "src" / "pactmw" / "provider" / "templates"
POT = REPO / "src" / "pactmw" / "provider" / "locale" / "pactmw.pot"


def extracted_pot(templates: Path = TEMPLATES) -> str:
    """The .pot text of every translatable string in `templates` (no dates: reproducible)."""
    catalog = Catalog(project="pactmw", domain="pactmw", fuzzy=False)
    methods = [("**.html", "jinja2.ext.babel_extract")]
    for filename, lineno, message, comments, _ in extract_from_dir(
        str(templates), methods, options_map={"**.html": {"extensions": "jinja2.ext.i18n"}}
    ):
        catalog.add(message, None, [(filename, lineno)], auto_comments=comments)
    buffer = io.BytesIO()
    write_po(buffer, catalog, omit_header=True, sort_output=True, width=99)
    return buffer.getvalue().decode("utf-8")


if __name__ == "__main__":  # python -m tests.support.catalog: refresh the shipped .pot
    POT.write_text(extracted_pot())
