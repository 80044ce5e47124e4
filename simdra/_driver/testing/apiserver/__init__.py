"""A kube-apiserver stand-in for tests, `simdra demo` and driver authors' CI.

with APIServer() as server:
    api = kubernetes.client.ResourceV1Api(server.api_client())
    ...
"""

from simdra._driver.testing.apiserver.errors import APIError
from simdra._driver.testing.apiserver.faults import Request, RequestLog
from simdra._driver.testing.apiserver.server import APIServer

__all__ = ["APIError", "APIServer", "Request", "RequestLog"]
