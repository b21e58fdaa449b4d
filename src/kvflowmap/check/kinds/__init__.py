"""Rule kinds: one module each, each exposing ``check(ctx) -> list[Finding]``
and ``PARAMS`` (parameter name -> (type, default, help))."""
