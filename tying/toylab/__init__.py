"""The toy lab: small tied and untied twins trained here, reproducing the paper's experiments at small scale.

* its text: :mod:`tying.loading.corpus` (offline text: Python's own docs, a user file or a hub dataset);
* :mod:`~tying.toylab.tokenizer` -- a byte-level BPE and the corpus as token ids;
* :mod:`~tying.toylab.model` -- toy Llama configs and twins sharing one initialisation;
* :mod:`~tying.toylab.provenance` -- the exact input/output split of the embedding gradient;
* :mod:`~tying.toylab.train` -- training the twins, logs, snapshots and embedding evolution.
"""
