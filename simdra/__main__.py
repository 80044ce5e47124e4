"""`python -m simdra` is the same as the `simdra` command."""

from simdra._driver.cli import console_main

console_main()
