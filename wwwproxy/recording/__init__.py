"""The one fetch-and-record engine (engine.py), the upstream client (upstream.py, its
responses read by upstream_protocol.py) and the services object everything above shares
(services.py)."""
