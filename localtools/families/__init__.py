"""Model families: one record each, its chat template, reply format (grammar, stop, parse), template checks and derivation."""
