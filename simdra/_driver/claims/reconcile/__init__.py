"""Reconciliation: which prepared claims the kubelet will never unprepare (`plan`,
pure) and what is done about them (`reconciler`)."""
