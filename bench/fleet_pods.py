"""Pods with claims from a ResourceClaimTemplate (one GPU each), created in a burst or at a
steady rate on the fleet's nodes; the real controller-manager makes their claims, the
real scheduler places them, kwok makes them Running and Ready. One watch sees every pod's
binding and readiness: the time each was seen, here, against the time its create call
returned, here.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from fleet_api import JSON, Api

NAMESPACE = "bench"
TEMPLATE = "one-gpu"
GPU_CLASS = "gpu.dra.example.com"
FLEET_TAINT = "simdra.dev/fleet"


@dataclass
class PodTimes:
    """Monotonic seconds per pod name: create call returned, seen bound, seen Ready."""

    created: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    ready: dict[str, float] = field(default_factory=dict)

    def scheduled_per_second(self) -> float:
        """Pods bound / (last binding seen - first pod created)."""
        if not self.bound or not self.created:
            return 0.0
        span = max(self.bound.values()) - min(self.created.values())
        return len(self.bound) / span if span > 0 else 0.0

    def created_per_second(self) -> float:
        """The burst's own rate: pods / (last create - first create); 0 with no pods."""
        if not self.created:
            return 0.0
        span = max(self.created.values()) - min(self.created.values())
        return len(self.created) / span if span > 0 else 0.0

    def start_latencies(self) -> list[float]:
        """Creation to Ready, per pod that became Ready, sorted."""
        return sorted(self.ready[n] - self.created[n] for n in self.ready if n in self.created)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of sorted values (0 when empty)."""
    if not values:
        return 0.0
    rank = max(1, min(len(values), round(p / 100 * len(values) + 0.5)))
    return values[rank - 1]


def pod_body(name: str) -> JSON:
    """A pod whose one container uses a claim from TEMPLATE, tolerating the fleet's taint."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "tolerations": [{"key": FLEET_TAINT, "operator": "Exists"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}],
            "containers": [{"name": "main", "image": "bench/none:never-pulled",
                            "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def prepare(api: Api) -> None:
    """The namespace and the one-GPU template."""
    api.call("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    api.call("POST", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates",
             {"metadata": {"name": TEMPLATE},
              "spec": {"spec": {"devices": {"requests": [
                  {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}}})


def _ready(pod: JSON) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions", []))


def _watch(api: Api, times: PodTimes, stop: threading.Event, version: str,
           prefix: str) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/pods?timeoutSeconds=20"
    while not stop.is_set():
        for event in api.watch(path, version):
            now, pod = time.monotonic(), event.get("object", {})
            version = pod.get("metadata", {}).get("resourceVersion", version)
            name = pod.get("metadata", {}).get("name", "")
            if not name.startswith(prefix):
                continue
            if pod.get("spec", {}).get("nodeName"):
                times.bound.setdefault(name, now)
            if _ready(pod):
                times.ready.setdefault(name, now)


def run_pods(api: Api, count: int, timeout: float, *, qps: float = 0.0,
             prefix: str = "burst-") -> PodTimes:
    """Create `count` pods, at once (8 clients) or at `qps` (one client, as
    ClusterLoader2's tuning sets do), and wait until all are Ready (or `timeout` passes)."""
    times, stop = PodTimes(), threading.Event()
    version = api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1")["metadata"][
        "resourceVersion"]
    watcher = threading.Thread(target=_watch, args=(api, times, stop, version, prefix),
                               daemon=True)
    watcher.start()

    def create(index: int) -> None:
        name = f"{prefix}{index}"
        api.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod_body(name))
        times.created[name] = time.monotonic()

    if qps > 0:
        start = time.monotonic()
        for index in range(count):
            time.sleep(max(0.0, start + index / qps - time.monotonic()))
            create(index)
    else:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(count)))
    deadline = time.monotonic() + timeout
    while len(times.ready) < count and time.monotonic() < deadline:
        time.sleep(0.5)
    stop.set()
    return times


def claims_with_status(api: Api) -> tuple[int, int]:
    """(claims in the namespace, those whose status.devices someone wrote)."""
    claims = api.items(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims")
    written = [c for c in claims if c.get("status", {}).get("devices")]
    return len(claims), len(written)
