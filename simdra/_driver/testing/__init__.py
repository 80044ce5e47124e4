"""simdra's test harness: one DRA node on one machine, no cluster and no hardware.

What a CI pipeline or a driver author imports is `simdra.testing`, its public face::

    from simdra.testing import LocalCluster, exactly

    with LocalCluster(tmp_path) as cluster:
        cluster.start_plugin(profile="gpu,nic", num_devices=2)
        cluster.create_claim("c1", exactly("gpu", "gpu.dra.example.com"))
        cluster.allocate("c1")
        answer = cluster.prepare("c1")

`LocalCluster` runs the plugin as a real process against `APIServer` (an API server
stand-in speaking the real REST API), `KubeletEmulator` (the kubelet's plugin watcher and
DRA calls over the real unix sockets) and `Allocator` (the scheduler's structured
allocation, with Kubernetes' CEL environment). ./hack/e2e.sh checks the stand-ins
against the real kube-apiserver and kube-scheduler.
"""

# Nothing is imported here: `kubectl dra why` and `devices --class` load the allocator
# (`allocation`) alone, without the API stand-in, the kubelet emulator and the
# Kubernetes client the rest of the harness needs.
