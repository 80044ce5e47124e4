"""Prepare and unprepare: the transaction (`transaction`) and its batch (`batch`)."""
