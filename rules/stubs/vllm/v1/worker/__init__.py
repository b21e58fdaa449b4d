"""Worker-side code of the v1 engine."""
