"""The Jinja2 environment the person-facing pages render with (imported only when built).

Jinja2 comes with the web extras (asgi, wsgi, flask, django, fastapi, serve) and the `pages`
extra; the verifiers and the rest of the core never import it.
"""

from __future__ import annotations

import gettext
from collections.abc import Callable, Mapping
from typing import Any

from pactmw.core.errors import MissingExtra

__all__ = ["PageTemplates"]


class PageTemplates:
    """An autoescaping Jinja2 environment over `loader`, then `folders`, then the built-in
    templates, with the i18n extension bound to `translations` (English when None)."""

    def __init__(
        self,
        *,
        folders: tuple[str, ...],
        loader: Any,
        translations: Any,
        filters: Mapping[str, Callable[..., Any]],
    ) -> None:
        try:
            import jinja2
        except ImportError as exc:
            raise MissingExtra("rendering pactmw's consent pages", "Jinja2", "pages") from exc
        loaders: list[jinja2.BaseLoader] = []
        if loader is not None:
            loaders.append(loader)
        loaders.extend(jinja2.FileSystemLoader(folder) for folder in folders)
        loaders.append(jinja2.PackageLoader("pactmw.provider", "templates"))
        self.environment = jinja2.Environment(
            loader=jinja2.ChoiceLoader(loaders),
            # Every page, whatever its file name: names and descriptions come from agents.
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            extensions=["jinja2.ext.i18n"],
            keep_trailing_newline=True,
        )
        self.environment.filters.update(filters)
        self.translations = translations if translations is not None else gettext.NullTranslations()
        self.environment.install_gettext_translations(  # type: ignore[attr-defined]
            self.translations, newstyle=True
        )

    def render(self, name: str, context: Mapping[str, Any]) -> str:
        return self.environment.get_template(name).render(context)
