"""The tuned lens's training time, estimated before it trains, and the advice to use a GPU when it is long (issue 19)."""

import pytest

from precompute.lens import LONG_TRAINING_SECONDS, LensOptions, estimate_text, long_training_advice, model_budget


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch

    from tests.tiny_models import make_tiny_model
    from tying.lens.parts import find_lens_parts
    from tying.loading.causal_lm import load_causal_lm

    path = make_tiny_model("llama", tmp_path_factory.mktemp("estimate") / "m", tied=True, vocab_size=300, seed=0)
    model, _ = load_causal_lm(str(path), torch.device("cpu"))
    batch = torch.randint(0, model.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    return model, batch, find_lens_parts(model)


def _budget(steps, accumulate=2):
    opts = LensOptions(steps=steps, batch_size=2, seq_len=16, tokens_per_step=32 * accumulate)
    return model_budget(opts, "cpu", None), opts


def test_flops_per_token_known_answer():
    from tying.lens.estimate import flops_per_token

    # P = 1000, d = 10, V = 100, 3 hidden states: 2000 + 2 (400 + 4000) + 200 + 4000
    assert flops_per_token(1000, 10, 100, 3) == 2000 + 2 * (400 + 4000) + 200 + 4000


def test_the_estimate_is_positive_and_scales_with_the_budget(tiny):
    from tying.lens.estimate import estimate_training

    model, batch, parts = tiny
    budget, _ = _budget(10)
    assert budget.accumulate == 2
    est = estimate_training(model, batch, budget, parts=parts)  # the real probe: timed micro-batches
    assert est.seconds > 0 and est.micro_seconds > 0 and est.micro_batches == 20
    assert est.seconds == pytest.approx(20 * est.micro_seconds)
    assert est.flops_per_token > 2 * est.n_params and est.tokens == 10 * 64
    # the same machine speed (one probe's timing): twice the steps, twice the time; twice the micro-batches too
    fixed = lambda *a, **k: est.micro_seconds
    double = estimate_training(model, batch, _budget(20)[0], parts=parts, probe=fixed)
    assert double.seconds == pytest.approx(2 * est.seconds)
    assert estimate_training(model, batch, _budget(10, accumulate=4)[0], parts=parts, probe=fixed).seconds == \
        pytest.approx(2 * est.seconds)
    text = estimate_text("tied", est, budget, "cpu")
    assert text.startswith("tied: training the tuned lens should take about ") and "20 micro-batches of 2 x 16" in text


def test_over_two_hours_says_so_and_how_to_run_it_on_a_gpu(tiny):
    from tying.lens.estimate import estimate_training

    model, batch, parts = tiny
    budget, opts = _budget(250)
    quick = estimate_training(model, batch, budget, parts=parts, probe=lambda *a, **k: 1.0)  # 500 s
    assert long_training_advice(quick, opts, budget, "cpu", "python -m precompute lens ...") is None
    slow = estimate_training(model, batch, budget, parts=parts, probe=lambda *a, **k: 30.0)  # 15,000 s
    assert slow.seconds > LONG_TRAINING_SECONDS
    command = "python -m precompute lens --tied a --untied b --name p --cache-dir cache --device cuda"
    advice = long_training_advice(slow, opts, budget, "cpu", command, "cache/p.duckdb")
    assert advice.startswith("That is over 2 hours on this cpu.")
    assert f"\n    {command}\n" in advice and "cache/p.duckdb" in advice and "--skip lens" in advice
    assert "about 4.2 h" in estimate_text("tied", slow, budget, "cpu")
    # already on a GPU: no machine to move to, only the options that shorten it
    on_gpu = long_training_advice(slow, opts, budget, "cuda", command)
    assert on_gpu.startswith("That is over 2 hours;") and command not in on_gpu


@pytest.mark.slow
def test_the_lens_command_prints_the_estimate_and_the_gpu_command(tmp_path, capsys, monkeypatch):
    """End to end on tiny models, the probe's timing made large: the estimate and the advice are printed."""
    from precompute.cli import main
    from tests.tiny_models import make_tiny_model, make_tokenizer
    from tying.lens import estimate

    make_tokenizer(tmp_path / "tok", 300)
    tied = make_tiny_model("llama", tmp_path / "tied", tied=True, tokenizer_dir=tmp_path / "tok", seed=1)
    untied = make_tiny_model("llama", tmp_path / "untied", tied=False, tokenizer_dir=tmp_path / "tok", seed=2)
    monkeypatch.setattr(estimate, "probe_micro_batch", lambda *a, **k: 5000.0)
    code = main(["lens", "--tied", str(tied), "--untied", str(untied), "--cache-dir", str(tmp_path), "--name", "g",
                 "--lens-steps", "2", "--lens-train-tokens", "1024", "--lens-eval-tokens", "512", "--lens-seq-len", "32",
                 "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 0, err
    for role in ("tied", "untied"):
        assert f"{role}: training the tuned lens should take about " in err
    assert err.count("That is over 2 hours on this cpu.") == 2
    assert (f"python -m precompute lens --tied {tied} --untied {untied} --name g --cache-dir {tmp_path} "
            "--lens-steps 2 --lens-seq-len 32 --lens-train-tokens 1024 --lens-eval-tokens 512 --device cuda") in err
