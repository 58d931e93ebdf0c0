"""A decoder in the style of current Hugging Face Llama code, written here
with random weights: RMSNorm, rotary position embeddings (cos/sin tables
gathered by position ids), grouped projections without bias,
F.scaled_dot_product_attention, a SiLU-gated MLP, and a KV cache passed in
and returned as tensors."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_positions=256, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, position_ids):
        # (B, T) -> (B, 1, T, head_dim), broadcast over heads
        cos = F.embedding(position_ids, self.cos_cached).unsqueeze(1)
        sin = F.embedding(position_ids, self.sin_cached).unsqueeze(1)
        return cos, sin


class LlamaAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin, past=None):
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.o_proj(y), (k, v)


class LlamaMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, dim, n_heads, hidden):
        super().__init__()
        self.input_layernorm = RMSNorm(dim)
        self.self_attn = LlamaAttention(dim, n_heads)
        self.post_attention_layernorm = RMSNorm(dim)
        self.mlp = LlamaMLP(dim, hidden)

    def forward(self, x, cos, sin, past=None):
        h, kv = self.self_attn(self.input_layernorm(x), cos, sin, past)
        x = x + h
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x, kv


class Llama(nn.Module):
    """forward(input_ids, position_ids, past=None) -> (logits, new past):
    past is a list of (k, v) per layer, (B, heads, positions, head_dim)."""

    def __init__(self, vocab=96, dim=64, n_layers=2, n_heads=4, hidden=172, max_positions=128):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.rotary_emb = RotaryEmbedding(dim // n_heads, max_positions)
        self.layers = nn.ModuleList([LlamaDecoderLayer(dim, n_heads, hidden) for _ in range(n_layers)])
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids, position_ids, past=None):
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(position_ids)
        new_past = []
        for i, layer in enumerate(self.layers):
            x, kv = layer(x, cos, sin, None if past is None else past[i])
            new_past.append(kv)
        return self.lm_head(self.norm(x)), new_past


def llama(seed=0, **kw):
    torch.manual_seed(seed)
    from models import seeded
    model = seeded(Llama(**kw), seed=seed)
    with torch.no_grad():  # sharper logits, so that greedy tokens vary
        model.lm_head.weight.mul_(4.0)
    return model


def greedy(model, idx, new_tokens, device=None):
    """Greedy decoding with the KV cache: prefill, then one token a step.
    With `device`, the model's tensors live there and only the last logits
    row of each step comes back to the host. Returns (tokens, past)."""
    tokens = idx.clone()
    ids = idx if device is None else idx.to(device)
    pos = torch.arange(idx.shape[1]).unsqueeze(0)
    logits, past = model(ids, pos if device is None else pos.to(device))
    for step in range(new_tokens):
        last = logits[:, -1, :]
        nxt = (last if device is None else last.cpu()).argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, nxt], dim=1)
        if step == new_tokens - 1:
            break
        p = torch.tensor([[tokens.shape[1] - 1]])
        logits, past = model(nxt if device is None else nxt.to(device),
                             p if device is None else p.to(device), past)
    return tokens, past
