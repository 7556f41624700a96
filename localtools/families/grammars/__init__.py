"""Tool-call grammars per family (GBNF); data only, shipped with the package."""
