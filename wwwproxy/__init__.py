"""wwwproxy: an offline caching proxy that records into WARC files."""

__version__ = "0.1.0"
