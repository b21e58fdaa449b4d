"""kvflowmap: map, check and document the KV-cache flow of vLLM and its KV connectors."""

__version__ = "0.1.0"
