"""The TLS context that trusts the API server as a ClusterAccess says and presents
our client certificate."""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from simdra._driver.kubeapi.access import ClusterAccess


def tls_context(access: ClusterAccess) -> ssl.SSLContext:
    """A client context: the given CA (else the system's), no verification at all with
    `insecure`, and the client certificate and key when given."""
    ca_text = access.ca_data.decode() if access.ca_data else None
    ca_file = None if ca_text else access.ca_file
    context = ssl.create_default_context(cafile=ca_file, cadata=ca_text)
    if access.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    with _pem_file(access.cert_data, access.cert_file) as cert, \
            _pem_file(access.key_data, access.key_file) as key:
        if cert:
            context.load_cert_chain(cert, key)
    return context


@contextmanager
def _pem_file(data: bytes | None, path: str | None) -> Iterator[str | None]:
    """A path to read PEM from: `path`, or for `data` a private temporary file that is
    gone again once the context has read it (ssl reads certificates only from files)."""
    if not data:
        yield path
        return
    fd, name = tempfile.mkstemp(prefix="simdra-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        yield name
    finally:
        os.unlink(name)
