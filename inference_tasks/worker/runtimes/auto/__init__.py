"""The auto runtime (INFERENCE_BACKEND=auto, the default): whatever this host measured fastest for the
served model, by request size, among the CPU runtimes installed (OpenVINO, CTranslate2, torch).

`export-model --backend auto` (setup.sh, demo.sh, the image build; or the worker itself at its first
start, under a lock: first_start.py) exports the model for each runtime and measures them here
(measure.py); the record (choice_record.py) routes each forward pass by its text count
(routed_encoder.py). Where nothing can be exported or measured, torch serves and says why."""
