"""Reading models: the two matrices from a checkpoint without the model (weights, and the modules of its steps: checkpoint, skeleton, tokenizer, headers, readers, binfiles, matrices), a whole model to run (causal_lm), shared vocabularies, local models, gradient logs and text corpora (corpus). The device is
tying.device, beside tying.errors: every part of the library may use it."""
