"""The loop: validate, execute, feed results back; middleware, run files, memory, context budget, routing, tracing."""
