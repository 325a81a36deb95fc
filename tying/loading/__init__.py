"""Reading models: the two matrices from safetensors, shared vocabularies, the device, local models and gradient logs."""
