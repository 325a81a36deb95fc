"""Gradient provenance: the exact split of the gradient reaching the embedding matrices (Figure 4).

In a tied model the one matrix ``W`` (n_vocab x d) is both the input lookup and the output
projection, so its gradient is the sum of two parts:

* ``g_in``  -- through the input lookup: the gradient of the embedding output ``E = W[ids]``,
  summed into the rows of the looked-up tokens (``index_add`` over the batch's ids);
  a row gets a gradient only when its token occurs in the batch;
* ``g_out`` -- through the output projection ``logits = h W^T``: ``dlogits^T h`` with ``h``
  the input of the output layer; every row gets a gradient at every step.

:class:`GradientProvenance` attaches hooks to a causal LM (any model with
``get_input_embeddings`` / ``get_output_embeddings``) and computes both parts, exactly, at
every backward pass. In an untied model the same hooks give the input matrix's and the
output matrix's gradients.

The paper's authors logged a cheaper input-side figure: the norm of the gradient w.r.t. the
embedding layer's *output* over all positions (a proxy: rows of repeated tokens are not yet
summed into the matrix). :class:`GradientProvenance` records it too
(:attr:`GradientNorms.input_proxy`), so both can be shown side by side.

Input-gradient scaling (Table 2): a factor ``s`` multiplies the gradient of the embedding
output before it flows back into ``W``. The embedding output's only parent is ``W``, so this
multiplies the input-side part and nothing else: ``W.grad = s * g_in + g_out``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def check_scale(input_grad_scale: float) -> float:
    """Return the factor as a float; ValueError("--input-grad-scale must be > 0") when it is not."""
    try:
        s = float(input_grad_scale)
    except (TypeError, ValueError):
        raise ValueError(f"--input-grad-scale must be > 0, got {input_grad_scale!r}") from None
    if not s > 0 or s != s or s == float("inf"):
        raise ValueError(f"--input-grad-scale must be > 0 (and finite), got {input_grad_scale}")
    return s


@dataclass(frozen=True)
class GradientNorms:
    """L2 (Frobenius) norms of one backward pass's gradients into the embedding matrices.

    Attributes:
        input: norm of the input-side gradient as applied to the matrix (``s * g_in``).
        output: norm of the output-side gradient ``g_out``.
        total: tied: norm of ``s * g_in + g_out`` (the matrix's whole gradient);
            untied: ``sqrt(input**2 + output**2)`` (both matrices together).
        input_unscaled: norm of ``g_in`` before the factor ``s``.
        input_proxy: the authors' input-side figure, as applied (after the factor): the
            norm of the gradient w.r.t. the embedding output over every position (summed in
            squares over the backward passes since the last reset).
    """

    input: float
    output: float
    total: float
    input_unscaled: float
    input_proxy: float = float("nan")

    @property
    def output_share(self) -> float:
        """``output / (input + output)``: the output side's share of the two norms (NaN when both are 0)."""
        both = self.input + self.output
        return self.output / both if both > 0 else float("nan")


class GradientProvenance:
    """Hooks that split the embedding gradient of a causal LM into its input and output parts.

    Use as a context manager (hooks removed on exit) or call :meth:`attach` / :meth:`detach`.
    Parts accumulate over every backward pass since the last :meth:`reset` (so gradient
    accumulation over several micro-batches adds up like ``.grad`` does)::

        with GradientProvenance(model, input_grad_scale=5.0) as prov:
            loss = loss_fn(model(ids).logits, targets)
            loss.backward()
            prov.norms()        # GradientNorms(input=..., output=..., total=...)
            prov.reset()

    Args:
        model: a model with ``get_input_embeddings()`` (an ``nn.Embedding``) and
            ``get_output_embeddings()`` (an ``nn.Linear`` without bias, weight of shape
            (n_vocab, d)).
        input_grad_scale: factor ``s`` > 0 on the input-side gradient (1: no change).

    Attributes:
        g_in: (n_vocab, d) float32, the unscaled input-side gradient ``g_in``.
        g_out: (n_vocab, d) float32, the output-side gradient ``g_out``.
        tied: whether input and output matrices are one parameter.
    """

    def __init__(self, model: torch.nn.Module, input_grad_scale: float = 1.0):
        self.scale = check_scale(input_grad_scale)
        self.embedding = model.get_input_embeddings()
        self.unembedding = model.get_output_embeddings()
        if self.embedding is None or self.unembedding is None:
            raise ValueError("the model has no input or no output embedding layer")
        w_in, w_out = self.embedding.weight, self.unembedding.weight
        if getattr(self.unembedding, "bias", None) is not None:
            raise ValueError("output layers with a bias are not supported")
        if w_in.shape != w_out.shape:
            raise ValueError(f"input {tuple(w_in.shape)} and output {tuple(w_out.shape)} matrices differ in shape")
        self.tied = w_in is w_out
        self._handles: list = []
        self.g_in = torch.zeros(w_in.shape, dtype=torch.float32, device=w_in.device)
        self.g_out = torch.zeros(w_out.shape, dtype=torch.float32, device=w_out.device)
        self.proxy_sq = torch.zeros((), dtype=torch.float64, device=w_in.device)

    # ------------------------------------------------------------------ hooks

    def _on_embedding(self, module, args, kwargs, output):
        ids = args[0] if args else kwargs["input"]
        if not output.requires_grad:
            return None
        padding_idx = getattr(module, "padding_idx", None)

        def on_grad(grad: torch.Tensor) -> torch.Tensor:
            flat = grad.reshape(-1, grad.shape[-1]).to(torch.float32)
            self.g_in.index_add_(0, ids.reshape(-1).to(self.g_in.device), flat)
            self.proxy_sq += flat.double().square().sum().to(self.proxy_sq.device)
            if padding_idx is not None:
                self.g_in[padding_idx] = 0  # nn.Embedding never updates the padding row
            return grad * self.scale if self.scale != 1.0 else grad

        output.register_hook(on_grad)
        return None

    def _on_unembedding(self, module, args, kwargs, output):
        h = (args[0] if args else kwargs["input"]).detach()
        if not output.requires_grad:
            return None

        def on_grad(grad: torch.Tensor) -> None:
            dlogits = grad.reshape(-1, grad.shape[-1]).to(torch.float32)
            self.g_out.addmm_(dlogits.T, h.reshape(-1, h.shape[-1]).to(torch.float32))

        output.register_hook(on_grad)
        return None

    # ------------------------------------------------------------------ API

    def attach(self) -> GradientProvenance:
        """Register the forward hooks (idempotent)."""
        if not self._handles:
            self._handles = [
                self.embedding.register_forward_hook(self._on_embedding, with_kwargs=True),
                self.unembedding.register_forward_hook(self._on_unembedding, with_kwargs=True),
            ]
        return self

    def detach(self) -> None:
        """Remove the hooks; the model computes plain gradients again."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __enter__(self) -> GradientProvenance:
        return self.attach()

    def __exit__(self, *exc) -> None:
        self.detach()

    def reset(self) -> None:
        """Zero the accumulated parts (call with ``optimizer.zero_grad``)."""
        self.g_in.zero_()
        self.g_out.zero_()
        self.proxy_sq.zero_()

    def norms(self) -> GradientNorms:
        """The L2 norms of the parts accumulated since the last :meth:`reset`."""
        n_in = torch.linalg.vector_norm(self.g_in).item()
        n_out = torch.linalg.vector_norm(self.g_out).item()
        if self.tied:
            total = torch.linalg.vector_norm(self.g_in * self.scale + self.g_out).item()
        else:
            total = float((self.scale * n_in) ** 2 + n_out**2) ** 0.5
        proxy = self.scale * float(self.proxy_sq.sqrt().item())
        return GradientNorms(input=self.scale * n_in, output=n_out, total=total, input_unscaled=n_in, input_proxy=proxy)
