# Included right after llama.cpp's project() when llama-cpp-python is compiled (`make demo`, `make
# test`: CMAKE_PROJECT_llama.cpp_INCLUDE). llama-cpp-python forces llama.cpp's `common` library on
# and installs it, yet its Python code never loads it: common, its HTTP client and their parsers
# are a large part of the compile. localtools' own llama-server build compiles what it needs.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp: build the common library (not loaded by llama-cpp-python)" FORCE)
