"""One module per CLI command: turn an Analysis into output."""
