"""The parts of ``bench/side_by_side.py``: processes and their watchdog, the servers (nginx,
Squid, wwwproxy, warcprox), the load (wrk and a Python client), the rows and the report."""
