"""What a user sees for a bad command line or cluster configuration: one line naming the
flag, exit status 2, before the plugin touches anything; and, when the API server is
down, one log line per attempt with the next delay (the client's own retries are off)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import urllib3

from simdra._driver.cli import main
from simdra._driver.kube import ClusterConfigError, load_api_client
from simdra._driver.testing.cluster import wait_until
from simdra._driver.testing.kubeconfig import write_kubeconfig

# Settings of the caller that would change what `simdra run` finds.
_CLEAN = ("NODE_NAME", "KUBECONFIG", "DEVICE_PROFILE", "DEVICE_BACKEND", "NUM_DEVICES",
          "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "SYSFS_ALLOW", "SYSFS_DENY",
          "PROC_ROOT")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _CLEAN:
        monkeypatch.delenv(name, raising=False)


def _simdra(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`simdra ARGS` in this process (what the console script calls): exit code and
    stderr. In-process because a Python start per case costs seconds on a busy machine;
    test_bad_command_line_exits_2_through_the_console_entry_point covers the process."""
    try:
        code = main(list(args))
    except SystemExit as exit_:  # argparse's own exit
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


def _one_line(result: tuple[int, str]) -> str:
    code, err = result
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _run_in(tmp_path: Path, *args: str) -> list[str]:
    """`simdra run` flags that keep every directory inside tmp_path."""
    return ["run", "--node-name", "n1",
            "--kubelet-registrar-directory-path", str(tmp_path / "registry"),
            "--kubelet-plugins-directory-path", str(tmp_path / "plugins"),
            "--cdi-root", str(tmp_path / "cdi"), *args]


@pytest.mark.parametrize(("args", "expected"), [
    ((), "--node-name"),
    (("--node-name", "n", "--num-devices", "many"), "--num-devices='many': not an integer"),
    (("--node-name", "n", "--driver-name", "Not_A_Domain"), "--driver-name"),
    (("--node-name", "n", "--device-backend", "nvml"), "--device-backend"),
    (("--node-name", "n", "--metrics-port", "70000"), "--metrics-port"),
    (("--node-name", "n", "--claim-status", "maybe"), "--claim-status"),
    (("--node-name", "n", "--log-format", "xml"), "--log-format"),
    (("--node-name", "n", "--rescan-interval", "0"), "--rescan-interval"),
    (("--node-name", "n", "--sysfs-deny", "eth1"), "--sysfs-deny='eth1': 'eth1' is not "
     "key:value with key one of pci, vendor, iface"),
    (("--node-name", "n", "--sysfs-deny", "pci:3b:00"), "not a PCI address like 0000:3b:00.0"),
    (("--node-name", "n", "--sysfs-allow", "vendor:nvidia"), "--sysfs-allow='vendor:nvidia': "
     "'vendor:nvidia' is not a PCI vendor id like 0x10de"),
    (("--node-name", "n", "--sysfs-allow", "iface:a/b"), "not a network interface name"),
    (("--node-name", "n", "--sysfs-allow", "iface:eth0,,pci:03:00.0"), "'' is not key:value"),
    (("--node-name", "n", "--reconcile-interval", "0.1"),
     "--reconcile-interval=0.1: must be 0 (off) or between 0.5 and 86400"),
    (("--node-name", "n", "--reconcile-interval", "-1"), "--reconcile-interval=-1"),
    (("--node-name", "n", "--reconcile-grace", "soon"), "--reconcile-grace='soon': not a number"),
    # Shorter than an ordinary unprepare takes: would free claims the kubelet is freeing.
    (("--node-name", "n", "--reconcile-grace", "0"),
     "--reconcile-grace=0: must be between 30 and 86400"),
    (("--node-name", "n", "--reconcile-grace", "29.9"), "--reconcile-grace=29.9"),
    (("--node-name", "n", "--reconcile-mode", "delete"),
     "--reconcile-mode='delete': must be report or free"),
])
def test_bad_flag_values_exit_2_with_one_clear_line(capsys, args, expected) -> None:
    assert expected in _one_line(_simdra(capsys, "run", *args))


def test_flags_can_come_from_environment_variables(capsys, monkeypatch) -> None:
    monkeypatch.setenv("NODE_NAME", "n")
    monkeypatch.setenv("NUM_DEVICES", "-3")

    assert "--num-devices=-3" in _one_line(_simdra(capsys, "run"))


def test_sysfs_selectors_are_normalised_from_flags_and_environment(monkeypatch) -> None:
    import simdra._driver.startup

    seen = []
    monkeypatch.setattr(simdra._driver.startup, "run_plugin",
                        lambda config, catalog: seen.append(config) or 0)
    monkeypatch.setenv("SYSFS_DENY", "vendor:10DE")

    assert main(["run", "--node-name", "n", "--sysfs-allow", " pci:3B:00.0, iface:eth1 "]) == 0
    assert seen[0].sysfs_allow == ("pci:0000:3b:00.0", "iface:eth1")
    assert seen[0].sysfs_deny == ("vendor:0x10de",)
    assert seen[0].proc_root is None


def test_no_in_cluster_config_and_no_kubeconfig(tmp_path: Path, capsys) -> None:
    line = _one_line(_simdra(capsys, *_run_in(tmp_path)))

    assert "no cluster configuration" in line and "--kubeconfig" in line
    assert not (tmp_path / "plugins").exists()


def test_missing_kubeconfig(tmp_path: Path, capsys) -> None:
    line = _one_line(_simdra(capsys, *_run_in(tmp_path, "--kubeconfig", str(tmp_path / "nope"))))

    assert f"--kubeconfig='{tmp_path / 'nope'}': cannot read: No such file" in line


@pytest.mark.parametrize(("content", "reason"), [
    ("clusters: [unclosed\n", "not valid YAML"),
    ("just a string\n", "not a kubeconfig"),
    ("apiVersion: v1\nkind: Config\nclusters: []\n", "not a usable kubeconfig"),
])
def test_invalid_kubeconfig(capsys, tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(content)

    line = _one_line(_simdra(capsys, *_run_in(tmp_path, "--kubeconfig", str(path))))

    assert line.startswith(f"simdra run: --kubeconfig='{path}': {reason}")


def test_unreadable_kubeconfig_from_the_environment(tmp_path: Path, capsys, monkeypatch) -> None:
    path = tmp_path / "kubeconfig"
    path.mkdir()  # a directory: cannot be read as a file, even by root

    monkeypatch.setenv("KUBECONFIG", str(path))
    line = _one_line(_simdra(capsys, *_run_in(tmp_path)))

    assert "--kubeconfig" in line and "cannot read" in line


def test_unknown_profile_name_is_not_taken_for_a_file(tmp_path: Path, capsys) -> None:
    line = _one_line(_simdra(capsys, *_run_in(tmp_path, "--device-profile", "tpu")))

    assert "--device-profile='tpu': unknown device profile 'tpu'" in line
    assert "cannot read" not in line


@pytest.mark.parametrize("value", ["inventory.yaml", "conf/devices", "x.json"])
def test_profile_that_looks_like_a_path_must_be_readable(capsys, monkeypatch, tmp_path: Path,
                                                          value: str) -> None:
    monkeypatch.chdir(tmp_path)
    line = _one_line(_simdra(capsys, *_run_in(tmp_path, "--device-profile", value)))

    assert f"--device-profile='{value}': cannot read the inventory file" in line


@pytest.mark.parametrize(("args", "expected"), [
    (("run", "--no-such-flag"), "unrecognized arguments: --no-such-flag"),
    (("launch",), "invalid choice: 'launch'"),
    (("run", "--node-name"), "expected one argument"),
    (("usage", "-o", "xml"), "invalid choice: 'xml'"),
])
def test_bad_command_line_is_one_line(capsys, args: tuple[str, ...], expected: str) -> None:
    assert expected in _one_line(_simdra(capsys, *args))


def test_bad_command_line_exits_2_through_the_console_entry_point(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in _CLEAN}
    result = subprocess.run([sys.executable, "-m", "simdra", "run", "--node-name", "n1",
                             "--device-profile", "tpu"], capture_output=True, text=True,
                            env=env, timeout=60, check=False, cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "simdra run: --device-profile='tpu': unknown device profile 'tpu' (known: cpu, gpu, "
        "gpu-fractional, gpu-partitioned, gpu-shared, license, nic, nic-multi-numa); or give "
        "the path of an inventory file (with a / or a .yaml, .yml or .json suffix)"]


# `simdra demo` where the harness is not installed (the plugin image): the import system
# then finds no simdra._driver.testing, as Python does for a module set to None in sys.modules.
_NO_HARNESS = ("import sys; sys.modules['simdra._driver.testing'] = None; "
               "from simdra._driver.cli import main; sys.exit(main(['demo']))")


def test_demo_without_its_harness_names_what_to_install(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", _NO_HARNESS], capture_output=True,
                            text=True, timeout=60, check=False, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})

    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "simdra demo: not installed: simdra._driver.testing; install simdra with its `demo` extra "
        "from a source checkout: pip install '.[demo]' (the plugin image leaves the demo out)"]
    assert "Published" not in result.stdout


def test_demo_without_an_extra_dependency_names_it(capsys, monkeypatch) -> None:
    from simdra._driver.cli import demo

    monkeypatch.setattr(demo, "DEMO_DISTRIBUTIONS",
                        (*demo.DEMO_DISTRIBUTIONS, "simdra-not-installed"))

    line = _one_line(_simdra(capsys, "demo"))
    assert line.startswith("simdra demo: not installed: simdra-not-installed; ")
    assert "pip install '.[demo]'" in line


def test_demo_checks_exactly_the_demo_extra_of_pyproject() -> None:
    import tomllib

    from packaging.requirements import Requirement

    from simdra._driver.cli.demo import DEMO_DISTRIBUTIONS

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extra = project["project"]["optional-dependencies"]["demo"]
    assert sorted(Requirement(r).name for r in extra) == sorted(DEMO_DISTRIBUTIONS)


def test_version_comes_from_the_package_metadata(capsys) -> None:
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"simdra {version('simdra')}"


def test_usage_output_flag_has_help_text(capsys) -> None:
    assert main(["usage", "--help"]) == 0

    out = capsys.readouterr().out
    option = out[out.index("--output"):]
    assert "table for people" in option and "json for scripts" in option


def test_api_client_does_not_retry_by_itself(tmp_path: Path) -> None:
    accepted: list[int] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)

        def hang_up() -> None:  # every connection closed at once, unanswered
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                accepted.append(1)
                conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with load_api_client(str(write_kubeconfig(tmp_path / "kubeconfig", url))) as api, \
                pytest.raises(urllib3.exceptions.HTTPError):
            api.request("GET", "/version")
        listener.shutdown(socket.SHUT_RDWR)
    assert accepted == [1]


def test_load_api_client_errors_are_one_line(tmp_path: Path, capsys) -> None:
    with pytest.raises(ClusterConfigError) as caught:
        load_api_client(str(tmp_path / "missing"))

    assert "\n" not in str(caught.value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_api_server_down_logs_one_line_per_attempt_with_the_delay(tmp_path: Path, capsys) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{_free_port()}")
    log_path = tmp_path / "plugin.log"
    with open(log_path, "wb") as log:
        plugin = subprocess.Popen(
            [sys.executable, "-m", "simdra", *_run_in(tmp_path, "--kubeconfig", str(kubeconfig))],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: log_path.read_text().count("slice watch failed") >= 3, timeout=60,
                   what="three failed attempts in the plugin log")
    finally:
        plugin.terminate()
        plugin.wait(30)

    lines = log_path.read_text().splitlines()
    failures = [ln for ln in lines if "Connection refused" in ln]
    assert len(failures) >= 3
    assert all("again in" in ln or "retrying in" in ln for ln in failures), failures
    assert not [ln for ln in lines if "Retrying (" in ln], "urllib3 retried underneath"
