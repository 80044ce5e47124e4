"""`python -m driver` is the same as the `simdra` command."""

from driver.cli import console_main

console_main()
