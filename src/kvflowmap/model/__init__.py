"""Cross-file resolution over facts: names, classes, types and calls."""
