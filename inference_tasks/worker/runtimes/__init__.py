"""The runtimes that run models, one folder each: torch/ (this project's native BERT encoder and
sentence-transformers, the only runtime of cross-encoders and sparse encoders), openvino/ (an exported IR,
its export, measurement and precision choice) and numpy/ (the multilingual model's own forward pass).
registry.py names them; capabilities.py says what a loaded model offers tasks (a dense encoder, a pair
scorer, a sparse encoder); the modules beside them are shared by several runtimes (token counts,
token-bounded passes, sentence-transformers' pipeline around an encoder, the JSON tokenizer, model files)."""
