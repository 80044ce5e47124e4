"""What an operator sees of a running plugin: Prometheus metrics and structured logs.

`metrics` (prepare/unprepare instruments), `state` (gauges read from live objects at
scrape time), `server` (the HTTP endpoint) and `logs` (text/JSON log lines with claim,
pool and device context).
"""
