"""The v1 engine."""
