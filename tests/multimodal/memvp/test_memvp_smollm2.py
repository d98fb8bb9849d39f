"""MemVP around the real SmolLM2-135M (bundled GGUF): s = 0 leaves its logits bit-exact, an image moves them,
the KV cache keeps the text length, and input-space prompting's cache holds the n visual tokens too."""

from __future__ import annotations

import pytest
import torch

from icml24.language.pretrained import bundled_model_missing

MISSING = bundled_model_missing("smollm2-135m-instruct")


@pytest.mark.slow
@pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
def test_memvp_on_smollm2() -> None:
    import copy

    from icml24.language.pretrained import load_pretrained
    from icml24.multimodal.memvp import InputSpaceConfig, InputSpacePrompting, LMBackend, MemVP, MemVPConfig

    lm, tok = load_pretrained("smollm2-135m-instruct")
    lm = lm.float().eval()
    ids = torch.tensor([tok.encode("What colour is the square?")])
    with torch.no_grad():
        base = lm(input_ids=ids).logits
    feats = torch.randn(1, 16, 1024, generator=torch.Generator().manual_seed(0))
    shared = {id(p): p for p in lm.parameters()}
    torch.manual_seed(0)
    silent = MemVP(copy.deepcopy(lm, memo=dict(shared)), config=MemVPConfig(num_slots=20, scale=0.0)).eval()
    model = MemVP(copy.deepcopy(lm, memo=dict(shared)), config=MemVPConfig(num_slots=20)).eval()
    with torch.no_grad():
        assert torch.equal(silent(ids, feats), base)
        torch.nn.init.normal_(model.value_offset, std=0.5)
        moved = model(ids, feats)
        cache = LMBackend(model.lm).new_cache()
        model(ids, feats, cache=cache)
    assert moved.shape == base.shape and not torch.allclose(moved, base)
    assert all(shape[2] == ids.shape[1] for shape in LMBackend.cache_shapes(cache))
    inp = InputSpacePrompting(copy.deepcopy(lm, memo=dict(shared)), config=InputSpaceConfig()).eval()
    cache = LMBackend(inp.lm).new_cache()
    with torch.no_grad():
        assert inp(ids, feats, cache=cache).shape == base.shape
    assert all(shape[2] == 16 + ids.shape[1] for shape in LMBackend.cache_shapes(cache))
    assert model.generate(ids, feats, max_new_tokens=2).shape == (1, 2)
