#!/usr/bin/env bash
# Builds the simdra image, loads it into a kind cluster and deploys the plugin with
# simulated devices:
#
#   hack/kind-load.sh [overlay]     # overlay: fake (default) or fake-inventory
#
# Settings (environment): KIND_CLUSTER (default: kind), IMAGE (default: simdra:latest).
# The cluster needs Kubernetes 1.34+ (DRA GA); shared NIC bandwidth and the
# fake-inventory devices also need the DRAConsumableCapacity and DRAPartitionableDevices
# feature gates before 1.36. Then try the examples: kubectl apply -k deploy/examples
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cluster=${KIND_CLUSTER:-kind}
image=${IMAGE:-simdra:latest}
overlay=${1:-fake}

die() { echo "kind-load: $*" >&2; exit 1; }

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed or not on PATH"
done
docker info >/dev/null 2>&1 || die "cannot reach the Docker daemon (is it running?)"
[ -d "$root/deploy/overlays/$overlay" ] || die "no overlay deploy/overlays/$overlay"
kind get clusters 2>/dev/null | grep -qx "$cluster" \
  || die "no kind cluster '$cluster' (create one: kind create cluster --name $cluster)"

docker build -t "$image" "$root"
kind load docker-image "$image" --name "$cluster"

kube=(kubectl --context "kind-$cluster")
daemonset=daemonset/simdra-kubelet-plugin
existed=$("${kube[@]}" -n simdra get "$daemonset" -o name 2>/dev/null || true)
"${kube[@]}" apply -k "$root/deploy/overlays/$overlay"
if [ "$image" != simdra:latest ]; then
  "${kube[@]}" -n simdra set image "$daemonset" "plugin=$image"
fi
if [ -n "$existed" ]; then
  # The image name may be unchanged: only a restart makes the pods run the new build.
  "${kube[@]}" -n simdra rollout restart "$daemonset"
fi
"${kube[@]}" -n simdra rollout status "$daemonset" --timeout=180s
