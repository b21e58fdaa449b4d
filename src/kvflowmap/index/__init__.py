"""Per-file fact extraction (LibCST), its cache and the parallel runner."""
