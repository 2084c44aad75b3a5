"""The CTranslate2 runtime: the model converted once to CTranslate2's format with int8 weights
(export.py, an offline command) and run by its `Encoder` with one thread per child (ct2_encoder.py);
the fastest one-sentence forward measured here. `loader` is what runtimes/registry.py calls."""
