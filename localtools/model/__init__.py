"""The Model facade: render, decode under the grammar, parse; streaming; load() by name or path."""
