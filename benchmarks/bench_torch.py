"""PyTorch eager references for benchmarks/benchmark.py (optional: `pip install -e .[bench]`).

The same models as the JAX side: a dense FFN (Linear, ReLU, Linear) and a seed-style MoE
that loops over experts in Python (top-k on the router logits, softmax over the k,
capacity by token priority as in models/moe.py, index_add_ combine), each trained with MSE
plus the MoE's balance and z losses and Adam.
"""

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def version() -> str:
  return f'{torch.__version__} ({torch.get_num_threads()} threads)'


class LoopMoE(nn.Module):
  """Top-k of E experts (relu FFNs), a Python loop over experts; capacity_factor <= 0: dropless."""

  def __init__(self, d_model, d_expert, num_experts, top_k, capacity_factor, load_balance_coef=1e-2, z_loss_coef=1e-3):
    super().__init__()
    e, d, f = num_experts, d_model, d_expert
    self.num_experts, self.top_k, self.capacity_factor = e, top_k, capacity_factor
    self.coefs = (load_balance_coef, z_loss_coef)
    self.router = nn.Parameter(torch.randn(d, e) / math.sqrt(d))
    self.w1 = nn.Parameter(torch.randn(e, d, f) / math.sqrt(d))
    self.b1 = nn.Parameter(torch.zeros(e, f))
    self.w2 = nn.Parameter(torch.randn(e, f, d) / math.sqrt(f))
    self.b2 = nn.Parameter(torch.zeros(e, d))

  def capacity(self, num_tokens):
    if self.capacity_factor <= 0:
      return num_tokens
    c = math.ceil(self.capacity_factor * num_tokens * self.top_k / self.num_experts)
    return max(1, min(num_tokens, c))

  def forward(self, x_TxD):
    """(output, aux loss); assignments over capacity dropped in token order per choice rank."""
    num_tokens, k = x_TxD.shape[0], self.top_k
    logits_TxE = x_TxD @ self.router
    top_TxK, expert_TxK = logits_TxE.topk(k, dim=-1)
    weight_TxK = torch.softmax(top_TxK, dim=-1)
    expert_A = expert_TxK.T.reshape(-1)  # choice rank major: all first choices first (GShard)
    weight_A = weight_TxK.T.reshape(-1)
    token_A = torch.arange(num_tokens).repeat(k)
    cap = self.capacity(num_tokens)
    out_TxD = torch.zeros_like(x_TxD)
    for e in range(self.num_experts):
      idx = (expert_A == e).nonzero().squeeze(1)[:cap]
      tok = token_A[idx]
      h = F.relu(x_TxD[tok] @ self.w1[e] + self.b1[e])
      out_TxD.index_add_(0, tok, weight_A[idx, None] * (h @ self.w2[e] + self.b2[e]))
    load_E = torch.bincount(expert_A, minlength=self.num_experts).float() / expert_A.numel()
    balance = self.num_experts * torch.sum(load_E * torch.softmax(logits_TxE, -1).mean(0))
    z = torch.logsumexp(logits_TxE, -1).square().mean()
    return out_TxD, self.coefs[0] * balance + self.coefs[1] * z


def dense_ffn(d_model, d_ff):
  return nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))


def train_step_fn(model, x, y):
  """A no-argument callable: one MSE (+ aux) train step with Adam."""
  x, y = torch.tensor(np.array(x)), torch.tensor(np.array(y))
  opt = torch.optim.Adam(model.parameters(), lr=1e-3)

  def step():
    opt.zero_grad(set_to_none=True)
    out = model(x)
    out, aux = out if isinstance(out, tuple) else (out, 0.0)
    (F.mse_loss(out, y) + aux).backward()
    opt.step()

  return step


def matmul_fn(n):
  a = torch.randn(n, n)
  return lambda: torch.mm(a, a)
