"""The prepared claims on disk and their mirror in memory: records (`record`), the
checkpoint (`checkpoint`), the store (`prepared_store`), what unreadable records
reserve (`reserved`) and the usage report (`usage`)."""
