"""``wwwproxy fetch``: fetching the outgoing queue and prefetch lists, following links."""

from .links import (
    REQUISITE_KINDS,
    Link,
    extract_css_links,
    extract_html_links,
    is_css,
    is_html,
    registrable_domain,
    same_domain,
    same_host,
    under_prefix,
)

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
