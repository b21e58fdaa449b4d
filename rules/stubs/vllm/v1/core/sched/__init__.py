"""The v1 scheduler."""
