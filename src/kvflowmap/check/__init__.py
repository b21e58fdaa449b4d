"""``kvflowmap check``: rule files, the rule kinds that run them, and findings."""
