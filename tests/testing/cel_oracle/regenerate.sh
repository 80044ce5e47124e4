#!/usr/bin/env bash
# Re-records tests/testing/cel_go_cases.json: the verdict of Kubernetes' own DRA CEL
# compiler (k8s.io/dynamic-resource-allocation/cel, the versions tests/e2e/go.mod pins)
# on every expression of tests/testing/cel_cases.txt, against the device in that file.
# Needs Go and the e2e module's dependencies (downloaded by a first e2e build or
# `go mod download` in tests/e2e). The test allocator's verdicts are compared with these
# in tests/testing/test_allocator_cel_vs_cel_go.py.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/main.go" "$work/"
sed 's#^module .*#module celoracle#' "$root/tests/e2e/go.mod" > "$work/go.mod"
cp "$root/tests/e2e/go.sum" "$work/go.sum"
(cd "$work" && go mod edit -require=k8s.io/api@v0.36.3 \
  -require=k8s.io/dynamic-resource-allocation@v0.36.3 && go build -mod=mod -o oracle .)
python3 "$here/record.py" "$work/oracle" > "$work/cases.json"
mv "$work/cases.json" "$root/tests/testing/cel_go_cases.json"
