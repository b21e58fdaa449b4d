"""The GPU model runner (v2 layout)."""
