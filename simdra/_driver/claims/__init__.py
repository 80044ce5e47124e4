"""ResourceClaims on the node: the claim lane, cut by concept.

- `types`: the contract with the kubelet's gRPC face (ClaimRef, the answers,
  ClaimPreparer) and the errors about one claim;
- `source`: where claims are read from (the API server), and the parallel, deadlined
  read that starts every prepare;
- `prepare`: the transaction (`prepare.transaction`: fetch, plan, check, write, answer;
  unprepare likewise) and its batch (`prepare.batch`: the serialized section, group
  commit, the claims of a batch and their files phase by phase);
- `plan`: what a claim needs on this node, pure: its allocation read and checked, the
  plan with its counters, the CDI spec and env, opaque config, device metadata content;
- `ledger`: the capacity ledger the node checks every plan against (pure);
- `store`: the prepared claims on disk and in memory: records and their format, the
  checkpoint, the prepared store with its start-up recovery and device metadata files,
  reservations of unreadable records, the usage report;
- `reconcile`: prepared claims the kubelet will never unprepare (the plan, pure; the
  reconciler, with its Events);
- `status`: our entries in claims' `status.devices`, written off the prepare path.
"""
