"""``torch.nn.attention.varlen.varlen_attn`` on the simulated device (Neuron 2.34: it "work[s] on Neuron").

PyTorch 2.13's CPU build has no kernel for it: ``varlen_attn`` calls ``aten::_flash_attention_forward``, which
exists only in CUDA builds ("NotImplementedError: Could not run 'aten::_flash_attention_forward' with arguments
from the 'CPU' backend"), so the simulator has a kernel of its own (neuroncompat/simulator/varlen_attention.py).
The reference here is per-sequence ``scaled_dot_product_attention`` on the CPU; float32 rounding apart, equal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from helpers import run_python
from torch.nn.attention.varlen import varlen_attn

LENGTHS = (3, 7, 5)
TOL = {"rtol": 1e-5, "atol": 1e-5}  # float32, einsum vs SDPA summation order


def _packed(heads: int, kv_heads: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    total = sum(LENGTHS)
    q = torch.randn(total, heads, 16, generator=generator)
    k = torch.randn(total, kv_heads, 16, generator=generator)
    v = torch.randn(total, kv_heads, 16, generator=generator)
    return q, k, v


def _cu() -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32)


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    outs, start = [], 0
    for length in LENGTHS:
        part = [t[start : start + length].transpose(0, 1) for t in (q, k, v)]
        gqa = part[0].shape[0] != part[1].shape[0]
        outs.append(
            torch.nn.functional.scaled_dot_product_attention(*part, is_causal=causal, enable_gqa=gqa).transpose(0, 1)
        )
        start += length
    return torch.cat(outs)


def test_the_cpu_has_no_kernel_for_it() -> None:
    q, k, v = _packed(2, 2)
    with pytest.raises(NotImplementedError, match="aten::_flash_attention_forward' with arguments from the 'CPU'"):
        varlen_attn(q, k, v, _cu(), _cu(), max(LENGTHS), max(LENGTHS))


@pytest.mark.parametrize(("causal", "heads", "kv_heads"), [(False, 2, 2), (True, 2, 2), (True, 4, 2)])
def test_forward_and_backward_equal_per_sequence_sdpa(neuron: object, causal: bool, heads: int, kv_heads: int) -> None:
    q, k, v = (t.requires_grad_() for t in _packed(heads, kv_heads))
    on_device = [t.detach().to("neuron").requires_grad_() for t in (q, k, v)]
    cu = _cu().to("neuron")
    window = (-1, 0) if causal else (-1, -1)
    out = varlen_attn(*on_device, cu, cu, max(LENGTHS), max(LENGTHS), window_size=window, enable_gqa=heads != kv_heads)
    expected = _reference(q, k, v, causal)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.detach().cpu(), expected.detach(), **TOL)
    weights = torch.randn(expected.shape, generator=torch.Generator().manual_seed(1))
    (out * weights.to("neuron")).sum().backward()
    (expected * weights).sum().backward()
    for got, want in zip(on_device, (q, k, v), strict=True):
        torch.testing.assert_close(got.grad.cpu(), want.grad, **TOL)  # type: ignore[union-attr]


def test_the_logsumexp_and_the_out_variant(neuron: object) -> None:
    from torch.nn.attention.varlen import AuxRequest, varlen_attn_out

    q, k, v = (t.to("neuron") for t in _packed(2, 2))
    cu = _cu().to("neuron")
    out, lse = varlen_attn(q, k, v, cu, cu, max(LENGTHS), max(LENGTHS), return_aux=AuxRequest(lse=True))
    assert lse.shape == (2, sum(LENGTHS)) and lse.dtype == torch.float32
    scores = torch.einsum("qhd,khd->hqk", q[:3].cpu(), k[:3].cpu()) / 4.0
    torch.testing.assert_close(lse[:, :3].cpu(), torch.logsumexp(scores, -1), **TOL)
    buffer = torch.empty_like(q)
    varlen_attn_out(buffer, q, k, v, cu, cu, max(LENGTHS), max(LENGTHS))
    assert torch.equal(buffer.cpu(), out.cpu())


VARLEN_SCRIPT = """\
import torch
from torch.nn.attention.varlen import varlen_attn

q, k, v = (torch.randn(8, 2, 16, device="neuron", requires_grad=True) for _ in range(3))
cu = torch.tensor([0, 3, 8], dtype=torch.int32, device="neuron")
out = varlen_attn(q, k, v, cu, cu, 5, 5, window_size=(-1, 0))
out.sum().backward()
torch.accelerator.synchronize()
print("varlen", tuple(out.shape), torch.accelerator.memory_allocated() > 0, torch.accelerator.max_memory_allocated() > 0)
"""


@pytest.mark.slow
def test_the_dry_run_does_not_flag_it(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(VARLEN_SCRIPT)
    result = run_python(
        f"from neuroncompat.cli import main; main(['simulate', '--strict', '--', {sys.executable!r}, 'train.py'])",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "varlen (8, 2, 16) True True" in result.stdout
    assert "): passed" in result.stdout
