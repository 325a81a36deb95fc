"""The paper's published figures (Lopardo et al., Findings of ACL 2026), for side-by-side display.

These are quoted numbers, never computed here. Keys use the paper's words.
"""

from __future__ import annotations

PAPER = "Lopardo et al., Weight Tying Biases Token Embeddings Towards the Output Space (Findings of ACL 2026)"

# Presets: the paper's three matched pairs (tied, untied) as Hugging Face ids.
PRESETS: dict[str, dict[str, str]] = {
    "olmo": {"tied": "allenai/OLMo-1B-hf", "untied": "allenai/OLMo-1B-0724-hf"},
    "gptneo-pythia": {"tied": "EleutherAI/gpt-neo-2.7B", "untied": "EleutherAI/pythia-2.8b"},
    "qwen3": {"tied": "Qwen/Qwen3-4B", "untied": "Qwen/Qwen3-8B"},
}

# Table 1: mean per-token cosine, comparison -> method -> value.
TABLE1: dict[str, dict[str, dict[str, float]]] = {
    "olmo": {
        "I->O": {"identity": 0.012, "orthogonal": 0.440, "linear": 0.574},
        "O->T": {"identity": 0.014, "orthogonal": 0.669, "linear": 0.719},
        "I->T": {"identity": 0.001, "orthogonal": 0.420, "linear": 0.525},
    },
    "gptneo-pythia": {
        "I->O": {"identity": -0.001, "orthogonal": 0.456, "linear": 0.518},
        "O->T": {"identity": 0.001, "orthogonal": 0.507, "linear": 0.637},
        "I->T": {"identity": 0.000, "orthogonal": 0.376, "linear": 0.507},
    },
}

# Table 5: k-NN overlap@10 by matrix pair.
TABLE5: dict[str, dict[str, float]] = {
    "olmo": {"T~I": 0.496, "T~O": 0.733, "I~O": 0.455},
    "qwen3": {"T~I": 0.366, "T~O": 0.712, "I~O": 0.366},
    "gptneo-pythia": {"T~I": 0.372, "T~O": 0.408, "I~O": 0.611},
}

# Tuned-lens KL in bits, OLMo, hidden states input, 1..16.
TUNED_LENS_KL: dict[str, dict[str, list[float]]] = {
    "olmo": {
        "untied": [7.01, 6.64, 4.84, 4.21, 3.90, 3.74, 3.52, 3.28, 3.11, 2.88, 2.53, 2.14, 1.98, 1.68, 1.31, 0.83, 0.18],
        "tied": [8.86, 9.61, 6.42, 4.91, 4.37, 4.06, 3.61, 3.41, 3.30, 2.95, 2.72, 2.30, 2.18, 2.52, 2.79, 1.37, 2.06],
    }
}


def preset_for(tied: str | None, untied: str | None) -> str | None:
    """The preset whose ids are exactly (tied, untied), if any: used to show the paper's numbers."""
    for name, ids in PRESETS.items():
        if ids["tied"] == tied and ids["untied"] == untied:
            return name
    return None
