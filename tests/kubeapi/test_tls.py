"""The plugin's API client over real TLS, loaded from a kubeconfig as `simdra run`
loads it: the CA it trusts, the name it checks, the client certificate and the token
it presents; a server it cannot trust is refused."""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path
from typing import Any

import pytest
import urllib3

from simdra._driver.kube import ClusterConfigError, load_api_client

from .conftest import CLIENT_NAME, SERVER_NAME, Certs
from .test_config import write_kubeconfig


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _get(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Any:
    path = write_kubeconfig(tmp_path / "kubeconfig", cluster, user)
    with load_api_client(path) as api:
        return api.request("GET", "/version", timeout=10.0)


def test_ca_data_server_name_client_cert_files_and_token(tls_server: str, certs: Certs,
                                                         tmp_path: Path) -> None:
    seen = _get(tmp_path, {"server": tls_server, "certificate-authority-data": _b64(certs.ca),
                           "tls-server-name": SERVER_NAME},
                {"client-certificate": str(certs.client_cert),
                 "client-key": str(certs.client_key), "token": "secret"})

    assert seen == {"authorization": "Bearer secret", "client": CLIENT_NAME, "path": "/version"}


def test_ca_file_and_client_cert_data(tls_server: str, certs: Certs, tmp_path: Path) -> None:
    seen = _get(tmp_path, {"server": tls_server, "certificate-authority": str(certs.ca),
                           "tls-server-name": SERVER_NAME},
                {"client-certificate-data": _b64(certs.client_cert),
                 "client-key-data": _b64(certs.client_key)})

    assert (seen["client"], seen["authorization"]) == (CLIENT_NAME, None)
    # The key data left no file behind.
    assert list(Path(tempfile.gettempdir()).glob("simdra-tls-*")) == []


def test_the_server_name_is_checked_without_tls_server_name(tls_server: str, certs: Certs,
                                                            tmp_path: Path) -> None:
    # The certificate names apiserver.test, the URL says 127.0.0.1.
    with pytest.raises(urllib3.exceptions.SSLError):
        _get(tmp_path, {"server": tls_server, "certificate-authority": str(certs.ca)}, {})


def test_a_server_signed_by_another_ca_is_refused(tls_server: str, certs: Certs,
                                                  tmp_path: Path) -> None:
    with pytest.raises(urllib3.exceptions.SSLError):
        _get(tmp_path, {"server": tls_server, "certificate-authority": str(certs.other_ca),
                        "tls-server-name": SERVER_NAME}, {})


def test_insecure_skip_tls_verify_trusts_any_server(tls_server: str, tmp_path: Path) -> None:
    seen = _get(tmp_path, {"server": tls_server, "insecure-skip-tls-verify": True},
                {"token": "t"})

    assert seen["authorization"] == "Bearer t"


def test_an_unreadable_ca_is_one_line_at_load(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", {
        "server": "https://127.0.0.1:1", "certificate-authority": "missing.crt"}, {})

    with pytest.raises(ClusterConfigError) as caught:
        load_api_client(path)

    assert "TLS setup failed" in str(caught.value) and "\n" not in str(caught.value)
