"""Attention layers (stub)."""
