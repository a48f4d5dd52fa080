"""``wwwproxy fetch``: fetching the outgoing queue and prefetch lists, following links."""

from .css_links import extract_css_links
from .html_links import extract_html_links
from .links import REQUISITE_KINDS, Link, is_css, is_html
from .scope import registrable_domain, same_domain, same_host, under_prefix

__all__ = [
    "REQUISITE_KINDS",
    "Link",
    "extract_css_links",
    "extract_html_links",
    "is_css",
    "is_html",
    "registrable_domain",
    "same_domain",
    "same_host",
    "under_prefix",
]
