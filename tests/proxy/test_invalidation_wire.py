"""An unsafe request invalidates the stored GET copy (RFC 9111 §4.4), on the wire: a client
talks to the proxy over a real socket, the proxy to a real origin whose document is fresh for
an hour.  A non-error answer to POST, PUT or DELETE makes the proxy ask the origin again (with
its copy's validator) on the next GET; an error answer, or a Location naming another host,
leaves the copies in use; offline the invalidated copy is still served."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from wwwproxy.http.policy import Mode

from .conftest import Proxy, serving

DOC = "/doc"


@dataclass
class Documents:
    """An origin with one document, ``GET /doc`` (fresh for an hour; its ETag and body name its
    version).  Any other request changes the document and answers as its ``X-Status``,
    ``X-Location`` and ``X-Content-Location`` headers ask."""

    version: int = 1
    #: (Host, If-None-Match) of every GET of the document
    gets: list[tuple[str, str | None]] = field(default_factory=list)
    port: int = 0

    def url(self, path: str = DOC, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    @property
    def etag(self) -> str:
        return f'"v{self.version}"'

    async def handle(self, request: web.Request) -> web.Response:
        if request.method == "GET" and request.path == DOC:
            condition = request.headers.get("If-None-Match")
            self.gets.append((request.host, condition))
            headers = {"Cache-Control": "max-age=3600", "ETag": self.etag}
            if condition == self.etag:
                return web.Response(status=304, headers=headers)
            return web.Response(text=f"version {self.version}", headers=headers)
        await request.read()
        self.version += 1
        answer = {
            name: request.headers[f"X-{name}"]
            for name in ("Location", "Content-Location")
            if f"X-{name}" in request.headers
        }
        status = int(request.headers.get("X-Status", "200"))
        return web.Response(status=status, headers=answer, body=b"" if status == 204 else b"ok")


@pytest.fixture
async def documents() -> AsyncIterator[Documents]:
    origin = Documents()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", origin.handle)
    async with serving(app) as origin.port:
        yield origin


async def cached(proxy: Proxy, documents: Documents, host: str = "127.0.0.1") -> None:
    """Record the document under ``host`` and check the proxy then serves it itself."""
    url = documents.url(host=host)
    assert (await proxy.get(url)).text == f"version {documents.version}"
    await proxy.recorded(url)
    before = len(documents.gets)
    assert (await proxy.get(url)).status == 200
    assert len(documents.gets) == before, "the fresh copy was not served from the cache"


@pytest.mark.parametrize(
    ("method", "status"),
    [("POST", 200), ("POST", 303), ("PUT", 201), ("PUT", 204), ("DELETE", 200), ("PATCH", 200)],
)
async def test_a_non_error_answer_to_an_unsafe_method_invalidates(proxy, documents, method, status):
    await cached(proxy, documents)
    old = documents.etag
    reply = await proxy.get(documents.url(), method, data=b"x=1", headers={"X-Status": str(status)})
    assert reply.status == status

    reply = await proxy.get(documents.url())
    assert reply.text == "version 2"
    assert documents.gets[-1] == (f"127.0.0.1:{documents.port}", old)  # a revalidation
    await proxy.recorded(documents.url(), count=4)
    assert (await proxy.get(documents.url())).text == "version 2"
    assert len(documents.gets) == 2  # the new copy is fresh again: served by the proxy


@pytest.mark.parametrize("status", [400, 404, 500, 503])
async def test_an_error_answer_leaves_the_copy_in_use(proxy, documents, status):
    await cached(proxy, documents)
    reply = await proxy.get(documents.url(), "POST", data=b"x=1", headers={"X-Status": str(status)})
    assert reply.status == status
    assert (await proxy.get(documents.url())).text == "version 1"
    assert len(documents.gets) == 1


@pytest.mark.parametrize("header", ["Location", "Content-Location"])
async def test_a_same_origin_location_is_invalidated(proxy, documents, header):
    await cached(proxy, documents)
    reply = await proxy.get(
        documents.url("/comment"), "POST", data=b"x=1", headers={f"X-{header}": DOC}
    )
    assert reply.status == 200
    assert (await proxy.get(documents.url())).text == "version 2"
    assert documents.gets[-1][1] == '"v1"'


@pytest.mark.parametrize("header", ["Location", "Content-Location"])
async def test_a_location_on_another_host_is_not_invalidated(proxy, documents, header):
    await cached(proxy, documents, host="localhost")
    other = documents.url(host="localhost")
    reply = await proxy.get(
        documents.url("/comment"),
        "POST",
        data=b"x=1",
        headers={f"X-{header}": other, "X-Status": "303" if header == "Location" else "200"},
    )
    assert reply.status in (200, 303)
    assert (await proxy.get(other)).text == "version 1"
    assert len(documents.gets) == 1  # localhost's copy was served, the origin not asked


async def test_offline_the_invalidated_copy_is_still_served(proxy, documents):
    await cached(proxy, documents)
    assert (await proxy.get(documents.url(), "DELETE")).status == 200
    proxy.running.services.state.mode = Mode.OFFLINE
    reply = await proxy.get(documents.url())
    assert reply.status == 200 and reply.text == "version 1"
    assert len(documents.gets) == 1
    assert proxy.outgoing() == []  # served, not queued for a later fetch
    proxy.running.services.state.mode = Mode.ONLINE  # online again, the copy is still stale
    assert (await proxy.get(documents.url())).text == "version 2"
    assert documents.gets[-1][1] == '"v1"'
