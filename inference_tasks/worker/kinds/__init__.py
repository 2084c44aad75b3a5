"""Model kinds: what a catalogue entry's `kind` means to a worker, one class each (dense_embedding.py,
cross_encoder.py, sparse_embedding.py). A kind loads its model on a runtime (worker/runtimes/), warms it
up, plans and runs its micro-batches' shared passes, and guards the tasks it serves; registry.py maps a
catalogue kind to its class, and model_holder.py holds the one loaded model of a process. A new kind
is a module here plus one registry line."""
