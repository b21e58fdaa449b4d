"""KV connectors."""
