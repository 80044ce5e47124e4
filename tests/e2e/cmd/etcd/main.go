// Command etcd is etcd's server, built from go.etcd.io/etcd/server/v3 at the version
// k8s.io/kubernetes pins, so the e2e cluster needs no prebuilt binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
