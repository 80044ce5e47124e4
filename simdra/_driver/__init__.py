"""simdra's private internals. The public API is the `simdra` package; nothing here is
promised to stay (see README "Compatibility")."""

__version__ = "0.1.0"
