"""Model backends: each turns a prompt plus a constraint into text."""
