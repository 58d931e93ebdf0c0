"""genie.torch.KVCacheGenerator: prefill and greedy decode of a nanoGPT-style
model against a real `genie serve`, the KV cache resident on the server;
the tokens equal eager greedy decoding."""

import pytest

torch = pytest.importorskip("torch")

import genie  # noqa: E402
import genie.torch as gt  # noqa: E402
from models import GPT, seeded  # noqa: E402

torch.set_num_threads(1)

VOCAB, LAYERS, HEADS, EMBD = 96, 2, 4, 64


def model_and_prompt(seed):
    torch.manual_seed(seed)
    model = seeded(GPT(vocab_size=VOCAB, block_size=64, n_layer=LAYERS, n_head=HEADS, n_embd=EMBD),
                   seed=seed)
    with torch.no_grad():  # sharper logits, so that greedy tokens vary
        model.lm_head.weight.mul_(4.0)
    return model, torch.randint(0, VOCAB, (1, 9))


def test_generate_remote_matches_eager_with_cache_on_server(serve):
    model, idx = model_and_prompt(7)
    new = 16
    ref = gt.greedy_eager(model, idx, new)
    assert len(set(ref[0, 9:].tolist())) > 2  # a real sequence, not one token repeated
    with genie.Context("127.0.0.1", serve, use_env=False) as ctx, gt.KVCacheGenerator(model, ctx) as gen:
        assert not ctx.embedded
        tokens, stats = gen.generate(idx, new)
        assert tokens.tolist() == ref.tolist()
        steps = stats["bytes_per_step"]
        assert len(steps) == new - 1 and len(stats["decode_ms"]) == new - 1
        cache_step = LAYERS * 2 * EMBD * 4  # k and v of one position, every layer (f32)
        held = stats["server_tensor_bytes"]
        # The cache grows on the server, one position per step ...
        assert [b - a for a, b in zip(held, held[1:])] == [cache_step] * (new - 2)
        for s in steps:
            # ... while the token and its position go inside each submission
            # and one logits row comes back inside its completion: no
            # transfer of its own either way.
            assert s["written"] == 0 and s["read"] == VOCAB * 4 and s["returned"] == VOCAB * 4, s
        # The decode graph goes in full once, then as deltas far smaller than the caches.
        assert all(s["graph"] < 4096 for s in steps[1:]), steps
        total_cache = held[-1]
        assert sum(s["graph"] + s["written"] + s["read"] for s in steps[1:]) / (new - 2) < total_cache / 10
        # Again on the same generator: the decode graph is reused.
        tokens2, _ = gen.generate(idx, 4)
        assert tokens2.tolist() == ref[:, :13].tolist()


def test_generate_embedded_matches_eager(ctx):
    model, idx = model_and_prompt(3)
    with gt.KVCacheGenerator(model, ctx) as gen:
        tokens, stats = gen.generate(idx, 10)
    assert tokens.tolist() == gt.greedy_eager(model, idx, 10).tolist()
    assert all(s["graph"] == 0 for s in stats["bytes_per_step"])


def test_generate_refuses_positions_folded_from_the_cache_length(ctx):
    model, idx = model_and_prompt(1)

    class NoPos(torch.nn.Module):  # drops `pos`: positions come from torch.arange(past_len ...)
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, idx, past_kv=None, pos=None):
            return self.m(idx, past_kv)

    with gt.KVCacheGenerator(NoPos(model), ctx) as gen, pytest.raises(genie.UnsupportedError) as e:
        gen.generate(idx, 3)
    assert "cache length" in e.value.detail
