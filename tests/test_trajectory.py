"""`python -m precompute trajectory`: a cache's models on any text, for the Lens page's own text."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precompute.cli import main
from tying.layout import lens_files, model_dir, model_dirs

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "cache" / "demo.duckdb"
TEXT = "import os\nfor name in os.listdir('.'):\n    print(name)"


def _run(capsys, *args) -> tuple[int, str, str]:
    rc = main(["trajectory", *map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def traced():
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["trajectory", str(DEMO), "--text", TEXT, "--top-k", "3", "--max-tokens", "12"]) == 0
    return json.loads(buf.getvalue())


def test_the_shipped_demo_twins_and_their_translators_are_found():
    from tying.cache.store import open_cache
    from tying.cache.summary import summarize

    stages = summarize(open_cache(DEMO)).stages
    dirs = model_dirs(stages["load"]["params"], DEMO)
    assert set(dirs) == {"tied", "untied"} and all((d / "model.safetensors").is_file() for d in dirs.values())
    from tying.lens import LensBudget

    for role in dirs:  # the translator trained with the recorded budget comes first (either budget shape)
        budget = stages["lens"]["params"]["budget"]
        files = lens_files(DEMO, role, LensBudget.recorded(budget, role))
        assert files and json.loads(files[0].with_suffix(".json").read_text())["meta"]["budget"]["tokens_per_step"] \
            == LensBudget.recorded(budget, role).tokens_per_step


def test_trajectory_shape_and_known_answers(traced):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rows = pd.DataFrame(traced["rows"])
    assert set(rows["model"]) == {"tied", "untied"} and set(rows["lens"]) == {"tuned", "logit"}
    assert all(traced["models"][r]["lens"] for r in ("tied", "untied"))
    for role in ("tied", "untied"):
        folder = traced["models"][role]["model"]
        tok = AutoTokenizer.from_pretrained(folder)
        ids = tok(TEXT)["input_ids"][:12]
        sub = rows[rows["model"] == role]
        n_layers = AutoModelForCausalLM.from_pretrained(folder).config.num_hidden_layers
        # every position x hidden state x lens x rank, ranks in order of probability
        assert len(sub) == len(ids) * (n_layers + 1) * 2 * 3
        assert sorted(sub["layer"].unique()) == list(range(n_layers + 1))
        wide = sub.pivot_table(index=["lens", "layer", "position"], columns="rank", values="prob")
        assert ((wide[1] >= wide[2]) & (wide[2] >= wide[3])).all() and (wide.to_numpy() <= 1).all()
        # the logit lens at the last hidden state is the model's own next-token prediction
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        with torch.no_grad():
            probs = torch.softmax(model(torch.tensor([ids])).logits[0].float(), -1)
        last = sub[(sub["layer"] == n_layers) & (sub["rank"] == 1)]
        for lens in ("logit", "tuned"):  # the last translator is the identity: both lenses agree there
            got = last[last["lens"] == lens].sort_values("position")
            assert got["prediction"].tolist() == [tok.decode([int(i)]) for i in probs.argmax(-1)]
            np.testing.assert_allclose(got["prob"].to_numpy(), probs.max(-1).values.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("args, message", [
    (["--text", "   "], "no text"),
    (["--text", "x" * 2001], "at most 2,000"),
    (["--text", "a", "--max-tokens", "500"], "--max-tokens"),
])
def test_bad_text_is_one_line_exit_2(capsys, args, message):
    rc, out, err = _run(capsys, DEMO, *args)
    assert rc == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_a_cache_whose_models_are_elsewhere_says_so(capsys, tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir()
    shutil.copy(DEMO, tmp_path / "cache" / "demo.duckdb")
    monkeypatch.chdir(tmp_path)  # neither here nor beside the copied cache
    rc, out, err = _run(capsys, "demo", "--text", "hello")
    assert rc == 2 and "not on this machine" in err and len(err.strip().splitlines()) == 1
    assert model_dir("no/such/model", tmp_path / "cache" / "demo.duckdb") is None
    assert model_dir("allenai/OLMo-1B-hf", tmp_path / "cache" / "demo.duckdb") is None
