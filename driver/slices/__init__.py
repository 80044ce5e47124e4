"""ResourceSlice publishing: inventory -> desired slices (pure) -> reconcile with the API.

- `desired`: chunking of each pool into slices under the API's per-slice limits;
- `checks` (+ `validation`): local validation before anything is written;
- `diff`: the plan of deletes, updates and creates and the pool generation (pure);
- `semantic`, `dropped`, `naming`: comparison, dropped-field detection, slice names;
- `publisher`: the `Publisher` that lists/watches our slices and executes plans;
- `api`: the official client, used so that unknown device fields survive.
"""
