"""Report site: static pages generated from the results database, and a local server.

build_site(results_dir, out_dir) -> SiteResult    # blocklab report
make_server(site_dir, host=..., port=...)         # blocklab serve
report.watch.watch(results, out_dir, every_s=..., told=...)    # blocklab report --watch

Layer: beside fleet; reads stored runs (store) and derives through analysis and economics;
may import those and everything below; never commands, fleet or execution.

The names below are imported when first asked for (PEP 562), not with the package: a
module of it, such as the server's, does not bring in the site's generation (scipy and
the analysis: a quarter of a second of `blocklab --help`, which lists every command).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from blocklab.report.server import DEFAULT_HOST, make_server, resolve_in_site
    from blocklab.report.site import SiteResult, build_site, page_weight

_MODULE_OF = {
    "DEFAULT_HOST": "server",
    "make_server": "server",
    "resolve_in_site": "server",
    "SiteResult": "site",
    "build_site": "site",
    "page_weight": "site",
}

__all__ = [
    "DEFAULT_HOST",
    "SiteResult",
    "build_site",
    "make_server",
    "page_weight",
    "resolve_in_site",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
