"""The torch runtime: this project's native BERT encoder (no sentence-transformers import) for the models it
takes, sentence-transformers for the others, and the two torch-only kinds (a cross-encoder, a sparse
encoder). `loader` is what runtimes/registry.py and the kinds (worker/kinds/) call."""
