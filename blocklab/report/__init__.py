"""Report site: static pages generated from the results database, and a local server.

build_site(results_dir, out_dir) -> SiteResult    # blocklab report
make_server(site_dir, host=..., port=...)         # blocklab serve
watch(results, out_dir, every_s=..., told=...)    # blocklab report --watch

Layer: beside fleet; reads stored runs (store) and derives through analysis and economics;
may import those and everything below; never commands, fleet or execution.
"""

from blocklab.report.server import DEFAULT_HOST, make_server, resolve_in_site
from blocklab.report.site import SiteResult, build_site, page_weight
from blocklab.report.watch import watch

__all__ = [
    "DEFAULT_HOST",
    "SiteResult",
    "build_site",
    "make_server",
    "page_weight",
    "resolve_in_site",
    "watch",
]
