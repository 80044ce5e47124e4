"""Cluster configuration as the plugin loads it (simdra._driver.kubeapi.config): a pod's
ServiceAccount directory and kubeconfig variants, from real files; an unusable one is
one line naming what is wrong."""

from __future__ import annotations

import base64
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from simdra._driver.kubeapi import ClusterConfigError, in_cluster_access, kubeconfig_access

POD_ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def write_kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> str:
    """A one-context kubeconfig at `path`."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "here",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u"}}],
    }))
    return str(path)


def service_account(tmp_path: Path, token: str = "pod-token") -> Path:
    """A ServiceAccount directory as the kubelet mounts it."""
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_text("not read until a connection is made")
    return tmp_path


def rotate(path: Path, text: str) -> None:
    """Replace a file the way the kubelet does (a new file swapped in)."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    fresh.replace(path)


def test_in_cluster_uses_the_service_env_the_token_and_the_ca(tmp_path: Path) -> None:
    access = in_cluster_access(service_account(tmp_path), POD_ENV)

    assert access.server == "https://10.96.0.1:443"
    assert access.ca_file == str(tmp_path / "ca.crt")
    assert access.credentials.headers() == {"Authorization": "Bearer pod-token"}


def test_in_cluster_token_is_read_again_after_the_kubelet_rotates_it(tmp_path: Path) -> None:
    access = in_cluster_access(service_account(tmp_path), POD_ENV)

    rotate(tmp_path / "token", "rotated-token\n")

    assert access.credentials.headers() == {"Authorization": "Bearer rotated-token"}


def test_in_cluster_ipv6_service_host_is_bracketed(tmp_path: Path) -> None:
    env = {**POD_ENV, "KUBERNETES_SERVICE_HOST": "fd00::1"}

    assert in_cluster_access(service_account(tmp_path), env).server == "https://[fd00::1]:443"


def test_in_cluster_names_everything_missing_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ClusterConfigError) as caught:
        in_cluster_access(tmp_path, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"})

    text = str(caught.value)
    assert "\n" not in text and "KUBERNETES_SERVICE_PORT" in text
    assert str(tmp_path / "token") in text and str(tmp_path / "ca.crt") in text


def test_in_cluster_empty_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClusterConfigError, match="empty token file"):
        in_cluster_access(service_account(tmp_path, token=""), POD_ENV)


def test_kubeconfig_token_data_fields_and_tls_settings(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", {
        "server": "https://api.example:6443",
        "certificate-authority-data": base64.b64encode(b"CA PEM").decode(),
        "tls-server-name": "kubernetes.default", "insecure-skip-tls-verify": False,
    }, {"token": "static", "client-certificate-data": base64.b64encode(b"CERT").decode(),
        "client-key-data": base64.b64encode(b"KEY").decode()})

    access = kubeconfig_access(path)

    assert (access.server, access.ca_data, access.tls_server_name) == (
        "https://api.example:6443", b"CA PEM", "kubernetes.default")
    assert (access.cert_data, access.key_data, access.insecure) == (b"CERT", b"KEY", False)
    assert access.credentials.headers() == {"Authorization": "Bearer static"}


def test_kubeconfig_files_are_relative_to_its_directory(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", {
        "server": "api.example:6443", "certificate-authority": "pki/ca.crt",
        "insecure-skip-tls-verify": True,
    }, {"client-certificate": "pki/node.crt", "client-key": "/etc/abs/node.key"})

    access = kubeconfig_access(path)

    assert access.server == "https://api.example:6443"  # no scheme: https, as kubectl
    assert access.ca_file == str(tmp_path / "pki" / "ca.crt")
    assert (access.cert_file, access.key_file) == (str(tmp_path / "pki" / "node.crt"),
                                                   "/etc/abs/node.key")
    assert access.insecure is True
    assert access.credentials.headers() == {}


def test_kubeconfig_token_file_wins_and_is_read_again(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file")
    path = write_kubeconfig(tmp_path / "config", {"server": "https://api.example"},
                            {"token": "static", "tokenFile": "token"})
    access = kubeconfig_access(path)
    assert access.credentials.headers() == {"Authorization": "Bearer from-file"}

    rotate(tmp_path / "token", "rotated")

    assert access.credentials.headers() == {"Authorization": "Bearer rotated"}


def exec_user(tmp_path: Path) -> dict[str, Any]:
    """A kubeconfig user whose token comes from a credential plugin (a real program)."""
    plugin = tmp_path / "credential-plugin"
    plugin.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({{"
                      '"apiVersion": "client.authentication.k8s.io/v1", '
                      '"kind": "ExecCredential", "status": {"token": "from-exec"}}))\n')
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                     "interactiveMode": "Never"}}


def test_kubeconfig_exec_credentials_come_from_the_official_loader(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", {"server": "https://api.example:6443"},
                            exec_user(tmp_path))

    access = kubeconfig_access(path)

    assert access.server == "https://api.example:6443"
    assert access.credentials.headers() == {"Authorization": "Bearer from-exec"}


@pytest.mark.parametrize(("where", "field"), [("user", "as"), ("cluster", "proxy-url")])
def test_kubeconfig_unsupported_field_is_one_line_naming_it(tmp_path: Path, where: str,
                                                            field: str) -> None:
    cluster: dict[str, Any] = {"server": "https://api.example"}
    user: dict[str, Any] = {"token": "t"}
    (user if where == "user" else cluster)[field] = "x"
    path = write_kubeconfig(tmp_path / "config", cluster, user)

    with pytest.raises(ClusterConfigError) as caught:
        kubeconfig_access(path)

    assert str(caught.value) == f"--kubeconfig={path!r}: {where} field {field!r} is not supported"


@pytest.mark.parametrize(("cluster", "user", "reason"), [
    ({"server": "https://a", "certificate-authority-data": "%%%"}, {},
     "certificate-authority-data is not base64"),
    ({"server": "https://a"}, {"tokenFile": "missing"}, "No such file"),
    ({}, {}, "names no cluster with a server"),
])
def test_kubeconfig_unusable_values_are_one_line(tmp_path: Path, cluster: dict[str, Any],
                                                 user: dict[str, Any], reason: str) -> None:
    path = write_kubeconfig(tmp_path / "config", cluster, user)

    with pytest.raises(ClusterConfigError) as caught:
        kubeconfig_access(path)

    text = str(caught.value)
    assert text.startswith(f"--kubeconfig={path!r}: not a usable kubeconfig: ")
    assert reason in text and "\n" not in text


def test_a_token_file_that_vanishes_keeps_the_last_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("kept")
    path = write_kubeconfig(tmp_path / "config", {"server": "https://a"}, {"tokenFile": "token"})
    access = kubeconfig_access(path)

    os.unlink(tmp_path / "token")

    assert access.credentials.headers() == {"Authorization": "Bearer kept"}
