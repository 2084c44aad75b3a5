"""The OpenVINO runtime: the model exported once to OpenVINO IR (export.py, an offline command), every
precision timed and gated on the host that serves it (measure.py, held_out.py) and the fastest served
(precision_choice.py); int8 by NNCF with this project's recipe (int8_recipe.py). `loader` is what
runtimes/registry.py calls."""
