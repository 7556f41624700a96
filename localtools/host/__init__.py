"""Where localtools meets this machine: the model catalog and cache, GGUF metadata, CPU flags, the llama-server build."""
