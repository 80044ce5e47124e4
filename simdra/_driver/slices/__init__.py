"""ResourceSlice publishing: inventory -> desired slices (pure) -> reconcile with the API.

- `desired`: chunking of each pool into slices under the API's per-slice limits;
- `checks` (+ `validation`): local validation before anything is written;
- `diff`: the plan of deletes, updates and creates and the pool generation (pure);
- `semantic`, `dropped`, `naming`: comparison, dropped-field detection, slice names;
- `publisher`: the `Publisher` facade (start, update, wait_synced, stop, stats) over
  `workqueue` (debounce, per-pool retries), `watcher` (list+watch into `observed`'s
  cache) and `reconciler` (plan, write with `writes`, verify), which keeps
  `validated` pools, `server_changes` (dropped fields) and the `node_uid`;
  `stats` holds the counters and the snapshot;
- `api`: the official client, used so that unknown device fields survive.
"""
