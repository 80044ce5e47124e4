"""ResourceClaims on the node: allocation results, CDI specs, durable state, prepare/unprepare."""
