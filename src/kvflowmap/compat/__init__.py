"""``kvflowmap compat``: the vLLM KV-connector protocol surface per release,
the changes between two releases, and which releases a connector works with.

Nothing here imports click or the analysed code: sources are parsed into
facts (``kvflowmap.index``) and only the modules the surface needs are read."""
