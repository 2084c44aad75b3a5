"""What the host offers a worker: usable cores, the thread pools of native libraries, GPUs."""
