"""The proxy server: forwarding, recording, offline serving, the queue and CONNECT tunnels."""
