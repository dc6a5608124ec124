"""The joined LoRA product (elical.wide_lora): the same values and gradients as the two products."""

from __future__ import annotations

import pytest
import torch

from elical.wide_lora import WideLoraProduct, wide_lora_product


def parts(bias: bool, dtype=torch.float64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, 6, generator=g, dtype=dtype, requires_grad=True)
    weight = torch.randn(10, 6, generator=g, dtype=dtype)
    b = torch.randn(10, generator=g, dtype=dtype) if bias else None
    lora_a = torch.randn(3, 6, generator=g, dtype=dtype, requires_grad=True)
    lora_b = torch.randn(10, 3, generator=g, dtype=dtype, requires_grad=True)
    return x, weight, b, lora_a, lora_b


@pytest.mark.parametrize("bias", [False, True])
def test_wide_lora_matches_the_two_products_and_their_gradients(bias):
    x, weight, b, lora_a, lora_b = parts(bias)
    upstream = torch.randn(2, 5, 10, dtype=torch.float64)
    joined = wide_lora_product(x, weight, b, lora_a, lora_b, 0.5, torch.float64)
    grads = torch.autograd.grad(joined, (x, lora_a, lora_b), upstream)
    plain = torch.nn.functional.linear(x, weight, b) + 0.5 * (x @ lora_a.t()) @ lora_b.t()
    expected = torch.autograd.grad(plain, (x, lora_a, lora_b), upstream)
    torch.testing.assert_close(joined, plain)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_wide_lora_passes_gradcheck():
    x, weight, b, lora_a, lora_b = parts(True)
    assert torch.autograd.gradcheck(lambda *t: WideLoraProduct.apply(t[0], weight, b, t[1], t[2], 2.0),
                                    (x[0].detach().requires_grad_(), lora_a, lora_b))


def test_wide_lora_gradients_reach_float32_weights_from_a_bfloat16_product():
    x, weight, _, lora_a, lora_b = parts(False, torch.float32)
    out = wide_lora_product(x.detach(), weight, None, lora_a, lora_b, 1.0, torch.bfloat16)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert lora_a.grad is not None and lora_a.grad.dtype == torch.float32 and lora_b.grad.dtype == torch.float32
