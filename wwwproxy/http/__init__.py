"""Pure HTTP rules, with no sockets and no aiohttp: headers, the cache policy (RFC 9111),
content decoding and charsets.  Everything above (archive, recording, proxy, fetch) asks here."""
