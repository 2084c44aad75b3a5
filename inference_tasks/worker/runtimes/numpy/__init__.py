"""The numpy runtime: the built-in multilingual model (Google's Universal Sentence Encoder multilingual v3)
and its own pure-numpy forward pass. `loader` is what runtimes/registry.py calls."""
