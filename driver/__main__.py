"""`python -m driver` is the same as the `simdra` command."""

from driver.cli import main

raise SystemExit(main())
