"""A real TLS endpoint for simdra._driver.kubeapi's tests: a test CA, a server certificate for
the name `apiserver.test` only (not 127.0.0.1), a client certificate, and an HTTPS server
on 127.0.0.1 that answers every GET with what it saw of the caller."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SERVER_NAME = "apiserver.test"
CLIENT_NAME = "system:node:simdra-test"


@dataclass(frozen=True)
class Certs:
    """PEM files of the test CA, the server and the client."""

    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(cwd: Path, name: str) -> None:
    _openssl(cwd, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt", "-subj", f"/CN={name}",
             "-days", "2")


def _signed(cwd: Path, name: str, subject: str, extensions: str) -> None:
    _openssl(cwd, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={subject}")
    (cwd / f"{name}.ext").write_text(extensions)
    _openssl(cwd, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-set_serial", str(abs(hash(name)) % 10**9), "-days", "2", "-out", f"{name}.crt",
             "-extfile", f"{name}.ext")


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    cwd = tmp_path_factory.mktemp("certs")
    _ca(cwd, "ca")
    _ca(cwd, "other")
    _signed(cwd, "server", "apiserver", f"subjectAltName=DNS:{SERVER_NAME}\n"
            "extendedKeyUsage=serverAuth\n")
    _signed(cwd, "client", CLIENT_NAME, "extendedKeyUsage=clientAuth\n")
    return Certs(cwd, cwd / "ca.crt", cwd / "server.crt", cwd / "server.key",
                 cwd / "client.crt", cwd / "client.key", cwd / "other.crt")


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        peer = self.connection.getpeercert()  # type: ignore[attr-defined]
        subject = dict(pair[0] for pair in peer["subject"]) if peer else {}
        body = json.dumps({"authorization": self.headers.get("Authorization"),
                           "client": subject.get("commonName"), "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def tls_server(certs: Certs) -> Iterator[str]:
    """The https:// URL (by IP) of a server with the `apiserver.test` certificate that
    asks for (and reports) a client certificate signed by the test CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    context.load_verify_locations(certs.ca)
    context.verify_mode = ssl.CERT_OPTIONAL
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
