// Command pause is the sandbox ("pause") container's process for the e2e node: it
// holds the pod's namespaces open and exits cleanly on SIGTERM or SIGINT. Built
// locally so the node needs no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
