"""The models a worker runs and the runtimes that run them (sentence-transformers on torch, OpenVINO, the
numpy multilingual model): one `Embedder` interface (interface.py), made by loading.py, held by models.py."""
