"""ToyConnector: a single-class vLLM KV connector backed by an in-memory store."""

from toyconnector.connector import ToyConnector

__all__ = ["ToyConnector"]
