"""SDPA with an attention mask that requires grad: the device trains as the CPU does (a simulator bug, fixed).

Doge (its dynamic mask) and Inkling (learned relative-position logits added to the mask) give
``scaled_dot_product_attention`` a float mask that requires grad. On the CPU, SDPA's backend choice sees that and
takes the math kernel, which differentiates the mask (``sdp_utils_cpp.h``: flash attention refuses a mask that
requires grad). The simulator answers the choice for the device by asking the CPU about host aliases of the
tensors (``sdp_choice`` in ``simulator/native/accelerator_paths.cpp``), and the aliases do not require grad: the CPU
then picks its flash kernel, whose backward has no gradient for the mask, and the step fails with
"'_scaled_dot_product_flash_attention_for_cpu' is not differentiable with respect to argument 'attn_mask'"
(docs/architectures.md, rows doge and inkling_text). TorchNeuron documents nothing that would refuse this.

Fixed in ``sdp_choice``: each host alias gets the ``requires_grad`` of the tensor it stands for before
``at::_fused_sdp_choice`` is asked.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_sdpa_backward_through_a_mask_that_requires_grad_matches_the_cpu(neuron):
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(2, 4, 16, 16, generator=generator)
    bias = torch.randn(2, 4, 16, 16, generator=generator)
    grads = {}
    for device in ("cpu", "neuron"):
        q = query.to(device).detach().requires_grad_()
        b = bias.to(device).detach().requires_grad_()
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=b * 1.0)
        out.square().sum().backward()
        grads[device] = (q.grad.cpu(), b.grad.cpu())
    torch.testing.assert_close(grads["neuron"], grads["cpu"])
