"""The model2vec runtime: static models (catalogue kind "static"), a vector per vocabulary token averaged
over a text's tokens, looked up with numpy and the tokenizers library (no torch). `distillation.py`
makes one from a catalogue model (`inference-tasks distil-model`, at deploy time); `loader` is what
runtimes/registry.py calls."""
