"""Chat templates and the family table; data only, shipped with the package."""
