"""MkDocs hook: repository files the docs link to (notebooks, examples) ship with the site.

A page links to a file outside ``docs/`` the way it reads on a code host
(``../notebooks/01_approval_node.ipynb``). This hook adds each such file, as it is,
under ``repo/`` in the built site, so the link resolves there too and
``mkdocs build --strict`` still fails on a link to a file that does not exist.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

_LINK = re.compile(r"\]\((\.\./[^)\s#]+)")


class _RepositoryFile(File):
    """A file copied as it is, never rendered as a page."""

    def is_documentation_page(self) -> bool:
        return False

    def is_static_page(self) -> bool:
        return False


def on_files(files: Files, config: Any) -> Files:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    wanted: set[str] = set()
    for page in list(files.documentation_pages()):
        text = Path(page.abs_src_path or "").read_text(encoding="utf-8")
        for link in _LINK.findall(text):
            uri = posixpath.normpath(posixpath.join(posixpath.dirname(page.src_uri), link))
            if uri.startswith("../") and not uri.startswith("../../"):
                wanted.add(uri)
    for uri in sorted(wanted):
        source = (docs / uri).resolve()
        if not source.is_file() or root not in source.parents:
            continue  # left for mkdocs to report as a broken link
        relative = source.relative_to(root).as_posix()
        file = _RepositoryFile(
            relative,
            str(root),
            config["site_dir"],
            config["use_directory_urls"],
            dest_uri=f"repo/{relative}",
            inclusion=InclusionLevel.INCLUDED,
        )
        file.src_uri = uri  # the key a page's link resolves to
        file.abs_src_path = str(source)
        files.append(file)
    return files
