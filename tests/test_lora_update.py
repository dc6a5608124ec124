"""The pointwise LoRA update of compiled layers (elical.lora_update): addmm_'s values and gradients."""

from __future__ import annotations

import torch

from elical.lora_update import LoraUpdate


def parts(dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 10, generator=g, dtype=dtype, requires_grad=True)
    xa = torch.randn(6, 3, generator=g, dtype=dtype, requires_grad=True)
    weight_b = torch.randn(10, 3, generator=g, dtype=dtype, requires_grad=True)
    return base, xa, weight_b


def reference(base, xa, weight_b, scale):
    return torch.addmm(base, xa, weight_b.t(), alpha=scale)


def test_update_matches_addmm_and_its_gradients():
    base, xa, weight_b = parts()
    upstream = torch.randn(6, 10, dtype=torch.float64)
    got = LoraUpdate.apply(base, xa, weight_b, 0.5)
    want = reference(base, xa, weight_b, 0.5)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got, (base, xa, weight_b), upstream),
                    torch.autograd.grad(want, (base, xa, weight_b), upstream)):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(lambda *t: LoraUpdate.apply(*t, 2.0), parts())


def test_compiled_update_matches_addmm():
    base, xa, weight_b = parts(torch.float32)
    compiled = torch.compile(lambda *t: LoraUpdate.apply(*t, 0.5), dynamic=True)
    got = compiled(base, xa, weight_b)
    got.square().sum().backward()
    grads = [t.grad.clone() for t in (base, xa, weight_b)]
    for t in (base, xa, weight_b):
        t.grad = None
    want = reference(base, xa, weight_b, 0.5)
    want.square().sum().backward()
    torch.testing.assert_close(got, want)
    for grad, t in zip(grads, (base, xa, weight_b)):
        torch.testing.assert_close(grad, t.grad)
