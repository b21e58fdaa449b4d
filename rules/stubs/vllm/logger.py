"""Logging setup (miniature of ``vllm.logger``)."""

import logging


def init_logger(name: str) -> logging.Logger:
    """Return the logger for a vLLM module."""
    return logging.getLogger(name)
