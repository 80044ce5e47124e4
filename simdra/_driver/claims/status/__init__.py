"""Claim status: our `status.devices` entries (`writer`), written off the prepare path
(`worker`)."""
