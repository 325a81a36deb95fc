"""Logit lens and tuned lens (torch): finding a model's parts, the lens maths, training, batching, files."""
