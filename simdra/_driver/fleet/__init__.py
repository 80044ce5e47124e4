"""`simdra fleet`: one process playing the DRA driver of many simulated nodes.

Built on the public API only (`simdra`, `simdra.runtime`; import-linter contract
`fleet-on-public-api`), as any out-of-tree tool would be. By role:

- `mix`, `shard`, `churn` (pure): which nodes exist, what each holds, which this replica
  owns, and what happens to them when;
- `pool_plan`: a node's Inventory, computed by the very backend `simdra run` uses;
- `nodes`: the Node objects (create, adopt, remove);
- `publish`: one slice publisher per owned node;
- `claims`: the node side of claims (status.devices, the per-node ledger);
- `metrics`, `run`: the counters, and the process that ties it together.
"""
