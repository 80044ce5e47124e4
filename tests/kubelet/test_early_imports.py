"""What `simdra run` loads before it serves the kubelet: the flag and cluster-config
checks and the kubelet package, and nothing whose import only delays GetInfo (the API
client's HTTP stack, the sysfs backend, the claims and devices machinery)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs what `simdra run` runs up to `serve_kubelet_early`, with a kubeconfig and sysfs
# selectors given, then lists the modules loaded.
_PROBE = textwrap.dedent("""
    import json, sys
    from simdra._driver.cli import _parser
    from simdra._driver.cli.run import config_from_args
    from simdra._driver.kube import check_cluster_config
    import simdra._driver.startup

    args = _parser("run").parse_args(["run", "--node-name", "n1", "--kubeconfig", sys.argv[1],
                                      "--sysfs-allow", "pci:3b:00.0", "--sysfs-deny", "iface:eth0"])
    config = config_from_args(args)
    check_cluster_config(config.kubeconfig)
    print(json.dumps(sorted(sys.modules)))
""")

_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""

_LATER = ("urllib3", "kubernetes", "simdra._driver.kubeapi.client",
          "simdra._driver.kinds.sysfs.backend", "simdra._driver.claims.prepare.transaction",
          "simdra._driver.slices", "simdra._driver.plugin")


def test_nothing_heavy_loads_before_the_kubelet_is_served(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(_KUBECONFIG)
    result = subprocess.run([sys.executable, "-c", _PROBE, str(kubeconfig)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=True)
    loaded = json.loads(result.stdout)
    assert "simdra._driver.kubelet.early" in loaded and "simdra._driver.kubeapi.config" in loaded
    early = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in _LATER)]
    assert early == []
