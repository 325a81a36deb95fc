"""Tuned lenses in the tuned-lens library's format (issue 31): `export-lens` writes what the
library (0.2.0) loads, with the same predictions as ours; `--lens-from` reads one back and
gives the same trajectory; bad folders and mismatched lenses are refused in one line."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from precompute.cli import main
from tying.lens.interop import read_folder, unembed_hash

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "cache" / "demo.duckdb"
TEXT = "Les élèves lisent: déjà vu? 🙂 def f(x): return x"


def _json(*argv) -> dict:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(list(map(str, argv))) == 0
    return json.loads(buf.getvalue())


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    if not DEMO.exists():
        pytest.skip("the shipped demo cache is absent")
    out = tmp_path_factory.mktemp("lens") / "demo-lens"
    assert main(["export-lens", str(DEMO), "--out", str(out)]) == 0
    return out


def _model(role: str):
    from transformers import AutoModelForCausalLM

    from tying.cache.store import open_cache
    from tying.cache.summary import summarize
    from tying.layout import model_dirs

    con = open_cache(DEMO)
    folder = model_dirs(summarize(con).stages["load"]["params"], DEMO)[role]
    con.close()
    return AutoModelForCausalLM.from_pretrained(folder).eval(), folder


def test_the_export_is_the_librarys_folder_with_our_translators(exported):
    from precompute.trajectory import _stage_params, fitting_lens
    from tying.lens.parts import find_lens_parts

    _, lens_stage = _stage_params(DEMO)
    for role in ("tied", "untied"):
        model, _ = _model(role)
        parts = find_lens_parts(model)
        config = json.loads((exported / role / "config.json").read_text())
        assert config["lens_type"] == "linear_tuned_lens" and config["bias"] is True
        assert config["num_hidden_layers"] == model.config.num_hidden_layers == parts.n_hidden - 1
        assert config["d_model"] == model.config.hidden_size and config["unembed_hash"] == unembed_hash(parts)
        state = torch.load(exported / role / "params.pt", weights_only=True)
        assert set(state) == {f"{i}.{k}" for i in range(parts.n_hidden - 1) for k in ("weight", "bias")}
        ours, _ = fitting_lens(DEMO, role, parts, lens_stage)
        for i in range(parts.n_hidden - 1):
            assert torch.equal(state[f"{i}.weight"], ours.translators[i].weight.detach())
            assert torch.equal(state[f"{i}.bias"], ours.translators[i].bias.detach())
        back = read_folder(exported / role, parts)  # and back: every translator, the last the identity
        for a, b in zip(back.translators, ours.translators):
            assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)


def test_the_tuned_lens_library_predicts_what_precompute_trajectory_prints(exported):
    import tuned_lens  # requirements-nodeps.txt (the README's test command installs it with --no-deps)
    from transformers import AutoTokenizer

    traced = pd.DataFrame(_json("trajectory", DEMO, "--text", TEXT, "--top-k", "5", "--max-tokens", "24")["rows"])
    for role in ("tied", "untied"):
        model, folder = _model(role)
        lens = tuned_lens.TunedLens.from_model_and_pretrained(model, str(exported / role)).eval()
        ids = AutoTokenizer.from_pretrained(folder)(TEXT)["input_ids"][:24]
        with torch.no_grad():
            hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states
            ours = traced[(traced["model"] == role) & (traced["lens"] == "tuned")]
            for layer in range(model.config.num_hidden_layers):  # the library translates all but the last
                probs = torch.softmax(lens(hidden[layer], layer)[0].float(), -1)
                top = probs.topk(5, dim=-1)
                got = ours[ours["layer"] == layer].sort_values(["position", "rank"])
                np.testing.assert_allclose(got["prob"].to_numpy(), top.values.numpy().reshape(-1), atol=1e-4)


@pytest.mark.slow
def test_a_lens_read_back_with_lens_from_gives_the_same_trajectory(exported, tmp_path):
    from tying.cache.store import open_cache
    from tying.cache.summary import summarize
    from tying.layout import model_dirs

    con = open_cache(DEMO)
    dirs = model_dirs(summarize(con).stages["load"]["params"], DEMO)
    con.close()
    rc = main(["lens", "--tied", str(dirs["tied"]), "--untied", str(dirs["untied"]), "--name", "imported",
               "--cache-dir", str(tmp_path), "--lens-from", str(exported), "--lens-eval-tokens", "1024",
               "--device", "cpu"])
    assert rc == 0
    imported = tmp_path / "imported.duckdb"
    args = ("--text", TEXT, "--top-k", "5", "--max-tokens", "24")
    a = pd.DataFrame(_json("trajectory", DEMO, *args)["rows"])
    b_json = _json("trajectory", imported, *args)
    assert all(m["lens"] for m in b_json["models"].values())  # the imported lens is the one it found
    b = pd.DataFrame(b_json["rows"])
    key = ["model", "lens", "layer", "position", "rank"]
    a, b = a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True)
    assert a["prediction"].tolist() == b["prediction"].tolist()
    np.testing.assert_allclose(a["prob"], b["prob"], atol=1e-6)


def _user_error(capsys, *argv) -> str:
    assert main(list(map(str, argv))) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_bad_folders_and_mismatched_lenses_get_one_line(exported, tmp_path, capsys):
    from tying.errors import UserError
    from tying.lens.parts import find_lens_parts

    paper = ROOT / "cache" / "paper.duckdb"
    assert "python -m precompute lens" in _user_error(capsys, "export-lens", paper, "--out", tmp_path / "x")
    assert not (tmp_path / "x").exists()  # nothing half-written
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert "not an earlier lens export" in _user_error(capsys, "export-lens", DEMO, "--out", tmp_path / "busy")
    assert "not a tuned-lens folder" in _user_error(capsys, "lens", "--tied", "a", "--untied", "b",
                                                   "--lens-from", tmp_path / "busy")

    model, _ = _model("tied")
    parts = find_lens_parts(model)
    bad = tmp_path / "bad"
    for name, edit, says in (("hash", {"unembed_hash": "0" * 64}, "another unembedding"),
                             ("width", {"d_model": 7}, "translators of width 7")):
        folder = bad / name
        folder.mkdir(parents=True)
        (folder / "params.pt").write_bytes((exported / "tied" / "params.pt").read_bytes())
        config = json.loads((exported / "tied" / "config.json").read_text()) | edit
        (folder / "config.json").write_text(json.dumps(config))
        with pytest.raises(UserError, match=says) as info:
            read_folder(folder, parts, "the tied model")
        assert "\n" not in str(info.value) and "the tied model" in str(info.value)

    class Payload:  # a pickle that would run code on loading: weights_only refuses it
        def __reduce__(self):
            return (print, ("ran",))

    folder = bad / "pickle"
    folder.mkdir()
    (folder / "config.json").write_text((exported / "tied" / "config.json").read_text())
    torch.save({"0.weight": Payload()}, folder / "params.pt")
    with pytest.raises(UserError, match="weights_only"):
        read_folder(folder, parts)
    assert "ran" not in capsys.readouterr().out


def test_a_folder_is_written_whole_or_not_at_all(tmp_path):
    from tying.cache.writer import folder_written

    target = tmp_path / "lens"
    target.mkdir()
    (target / "old.txt").write_text("before")
    with pytest.raises(RuntimeError), folder_written(target) as tmp:
        (tmp / "new.txt").write_text("half")
        raise RuntimeError("killed mid-write")
    assert [p.name for p in tmp_path.iterdir()] == ["lens"] and [p.name for p in target.iterdir()] == ["old.txt"]
    with folder_written(target) as tmp:
        (tmp / "new.txt").write_text("whole")
    assert [p.name for p in tmp_path.iterdir()] == ["lens"] and [p.name for p in target.iterdir()] == ["new.txt"]


def test_lens_from_takes_a_folder_per_model_or_one_lens_for_a_one_model_run(exported):
    from precompute.lens_io import lens_from
    from tying.errors import UserError
    from tying.lens.parts import find_lens_parts

    model, _ = _model("tied")
    parts = find_lens_parts(model)
    _, chosen = lens_from(exported, "tied", parts, "the tied model")
    assert chosen == exported / "tied"
    _, chosen = lens_from(exported / "tied", "tied", parts, "the tied model")  # one tied model: the folder itself
    assert chosen == exported / "tied"
    with pytest.raises(UserError, match="no tuned-lens folder for the untied model"):
        lens_from(exported / "tied", "untied", parts, "the untied model")


def test_a_lens_saved_in_float16_parts_exports_as_it_reads(tmp_path):
    """A lens over 10 MB ships in float16 parts (SmolLM2's: tying/lens/shards.py); export-lens reads
    it whole: the library's params are the saved float16 values, within float16 of the trained ones."""
    import shutil

    from precompute.trajectory import _stage_params, fitting_lens
    from tying import layout
    from tying.lens.files import load_lens, read_lens_meta, save_lens
    from tying.lens.parts import find_lens_parts
    from tying.lens.shards import HEADER_MARGIN, parts_dir

    if not DEMO.exists():
        pytest.skip("the shipped demo cache is absent")
    cache = tmp_path / "demo.duckdb"
    shutil.copy(DEMO, cache)
    shutil.copytree(layout.lens_dir_of(DEMO), layout.lens_dir_of(cache))
    trained = {}
    for f in layout.lens_dir_of(cache).glob("*.safetensors"):  # the demo's, saved again in parts of 40 kB
        side = read_lens_meta(f)
        trained[f.name] = load_lens(f, side["fingerprint"])
        save_lens(trained[f.name], f, side["fingerprint"], side["meta"], max_bytes=HEADER_MARGIN + 40_000)
        assert len(list(parts_dir(f).iterdir())) >= 3
    out = tmp_path / "exported"
    assert main(["export-lens", str(cache), "--out", str(out)]) == 0
    _, lens_stage = _stage_params(cache)
    for role in ("tied", "untied"):
        parts = find_lens_parts(_model(role)[0])
        lens, used = fitting_lens(cache, role, parts, lens_stage)
        assert parts_dir(used).is_dir()
        state = torch.load(out / role / "params.pt", weights_only=True)
        for i in range(parts.n_hidden - 1):
            for k in ("weight", "bias"):
                saved, before = getattr(lens.translators[i], k), getattr(trained[used.name].translators[i], k)
                assert torch.equal(state[f"{i}.{k}"], saved.detach())
                assert torch.equal(saved, before.to(torch.float16).to(torch.float32))
