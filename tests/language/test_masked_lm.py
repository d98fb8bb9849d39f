"""BERT-style masking of the shared training module (``mask_tokens``)."""

import pytest
import torch

from icml24.language import IGNORE_INDEX, mask_tokens


def test_mask_tokens_rates_and_labels():
    ids = torch.randint(5, 40, (400, 50), generator=torch.Generator().manual_seed(0))
    attn = torch.ones_like(ids)
    attn[:, 45:] = 0
    corrupted, labels = mask_tokens(ids, mask_id=4, vocab_size=40, generator=torch.Generator().manual_seed(1),
                                    attention_mask=attn)  # fmt: skip
    chosen = labels != IGNORE_INDEX
    assert not chosen[:, 45:].any()  # padding is never chosen
    rate = chosen[:, :45].float().mean().item()
    assert rate == pytest.approx(0.15, abs=0.01)
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(corrupted[~chosen], ids[~chosen])
    masked = (corrupted[chosen] == 4).float().mean().item()
    kept = (corrupted[chosen] == ids[chosen]).float().mean().item()
    assert masked == pytest.approx(0.8, abs=0.03)
    assert kept == pytest.approx(0.1 + 0.1 / 35, abs=0.03)  # kept, or replaced by itself at random
    assert int(corrupted.min()) >= 4  # random replacements are regular tokens (or the mask)


def test_mask_tokens_is_seeded_and_validates():
    ids = torch.randint(5, 20, (4, 10), generator=torch.Generator().manual_seed(0))
    a = mask_tokens(ids, mask_id=4, vocab_size=20, generator=torch.Generator().manual_seed(3))
    b = mask_tokens(ids, mask_id=4, vocab_size=20, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="mask_prob"):
        mask_tokens(ids, mask_id=4, vocab_size=20, generator=torch.Generator(), mask_prob=1.5)
    with pytest.raises(ValueError, match="mask_id"):
        mask_tokens(ids, mask_id=20, vocab_size=20, generator=torch.Generator())
