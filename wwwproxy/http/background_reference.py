"""``docs/background-requests.md``, the built-in list of background requests for people,
generated from :data:`wwwproxy.http.background.ENDPOINTS` so that it cannot drift from it:
``python -m wwwproxy.http.background_reference > docs/background-requests.md`` (a test checks
the committed file is what this makes)."""

from __future__ import annotations

import sys

from .background import CHECKS, QUIET, Endpoint

__all__ = ["reference"]

_INTRODUCTION = """\
# Background requests: never queued offline

<!-- Generated from wwwproxy/http/background.py by
`python -m wwwproxy.http.background_reference > docs/background-requests.md`; edit that, not
this file. -->

A browser left running asks on its own for update checks, the time, safe-browsing lists,
telemetry and connectivity checks. Offline, wwwproxy answers the requests below at once and
never queues them, so the outgoing queue holds only what a person asked for. Online they are
fetched as any other request. `queue_background: true` queues them like any other request;
`dont_queue` adds patterns of your own; `queue_methods` (GET and HEAD by default) keeps every
other method (a form's POST, an update check's POST) out of the queue.

## Connectivity and captive-portal checks

Offline these get the answer the client expects when the network has no captive portal: a
browser that believes it is online goes on asking the proxy, which answers from its cache,
while a refusal would make it show a "log in to the network" notice or open a portal page.
When the proxy is online but the check's server cannot be reached, it gets a 503 instead.

| Pattern | Asked by | Answer |
| --- | --- | --- |
"""

_QUIET = """
## Other background requests

Offline these get a 503 ("not cached, not queued"); the client asks again later on its own.

| Pattern | Asked by |
| --- | --- |
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;")


def _answer(endpoint: Endpoint) -> str:
    answer = endpoint.answer
    assert answer is not None
    if not answer.body:
        return str(answer.status)
    return f"{answer.status} `{answer.body.decode('ascii').strip()}`".replace("|", "\\|")


def reference() -> str:
    """The Markdown list of the built-in background requests."""
    checks = "".join(f"| `{e.pattern}` | {_cell(e.why)} | {_answer(e)} |\n" for e in CHECKS)
    quiet = "".join(f"| `{e.pattern}` | {_cell(e.why)} |\n" for e in QUIET)
    return _INTRODUCTION + checks + _QUIET + quiet


if __name__ == "__main__":
    sys.stdout.write(reference())
