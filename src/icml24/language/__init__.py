"""Language models: the shared small transformer, tokenizers, training loop, metrics, corpora, and the
loader of real pretrained models (``pretrained``: SmolLM2-135M-Instruct, all-MiniLM-L6-v2, your own).

The papers of the field (``case_or_rule``, ``spikelm``, ``deep_fusion``, ...) build on these modules;
the multimodal papers reuse the transformer for their text side.
"""

from icml24.language.metrics import exact_match_last_number, last_number, perplexity, token_accuracy
from icml24.language.pretrained import (
    LoadedModel,
    MissingModelPackage,
    bundled_model_missing,
    load_pretrained,
    model_dir,
)
from icml24.language.tokenizers import SPECIAL_TOKENS, CharTokenizer, Tokenizer, WordTokenizer
from icml24.language.training import (
    IGNORE_INDEX,
    TrainConfig,
    causal_lm_labels,
    cosine_with_warmup,
    lm_loss,
    mask_tokens,
    train_lm,
)
from icml24.language.transformer import (
    KVCache,
    TransformerConfig,
    TransformerLM,
    from_hf_llama,
    to_hf_llama,
)

__all__ = [
    "IGNORE_INDEX",
    "SPECIAL_TOKENS",
    "CharTokenizer",
    "KVCache",
    "LoadedModel",
    "MissingModelPackage",
    "Tokenizer",
    "TrainConfig",
    "TransformerConfig",
    "TransformerLM",
    "WordTokenizer",
    "bundled_model_missing",
    "causal_lm_labels",
    "cosine_with_warmup",
    "exact_match_last_number",
    "from_hf_llama",
    "last_number",
    "lm_loss",
    "load_pretrained",
    "mask_tokens",
    "model_dir",
    "perplexity",
    "to_hf_llama",
    "token_accuracy",
    "train_lm",
]
