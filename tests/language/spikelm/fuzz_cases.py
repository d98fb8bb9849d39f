"""Fuzz cases for spikelm's exported callables (see tests/test_fuzz_api.py)."""

import torch

from icml24.language import TrainConfig
from icml24.language.spikelm import (
    BinaryLIF,
    ElasticBiSpiking,
    MaskedCharCorpus,
    SpikeLM,
    SpikeLMConfig,
    SpikingAttention,
    SpikingMLP,
    SpikingNeuron,
    atan_spike,
    elastic_bi_spike,
    encoder_config,
    energy_estimate,
    evaluate_masked_lm,
    firing_rates,
    train_masked_lm,
)

TEXTS = ["the quick brown fox jumps over the lazy dog. " * 3 + str(i) for i in range(12)]
CORPUS = MaskedCharCorpus(TEXTS, seq_len=16, held_out_every=3)
CONFIG = encoder_config(CORPUS.vocab_size, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=16)
torch.manual_seed(0)
MODEL = SpikeLM(CONFIG, spiking=SpikeLMConfig(time_steps=2))
EVAL_IDS, EVAL_LABELS = CORPUS.eval_set(4)
MODEL.record_spikes()
MODEL(EVAL_IDS)
U = torch.linspace(-1.0, 1.0, 9)

FUZZ_CASES = [
    dict(fn=elastic_bi_spike, args=(U, 0.5), invalid={"u": [U.numpy(), torch.arange(3)], "alpha": [0.0, -1.0, torch.tensor([1.0, 2.0])]}),
    dict(fn=atan_spike, args=(U,), kwargs={"slope": 2.0}, invalid={"v": [[0.1, 0.2]], "slope": [0.0, -2.0, "2"]}),
    dict(fn=ElasticBiSpiking, kwargs={"time_steps": 4, "alpha_init_factor": 2.0, "decay": 0.25},
         invalid={"time_steps": [0, 1.5, True], "amplitude": ["learned"], "alpha_init_factor": [0.0, -1.0],
                  "dynamics": ["yes"], "learn_alpha": [1], "decay": [-0.5]}),
    dict(fn=BinaryLIF, kwargs={"time_steps": 4, "beta": 0.25, "threshold": 1.0, "surrogate_slope": 2.0},
         invalid={"time_steps": [0], "beta": [1.5, -0.1], "threshold": [0.0, "auto"], "reset": ["hard"],
                  "surrogate_slope": [0.0]}),
    dict(fn=SpikingNeuron, kwargs={"time_steps": 4}, invalid={"time_steps": [0, "4"]}),
    dict(fn=SpikeLMConfig, kwargs={"alpha_init_factor": 2.0, "lif_beta": 0.25, "lif_threshold": 1.0},
         invalid={"neuron": ["lif"], "time_steps": [0, 2.5], "alpha_init_factor": [0.0], "lif_beta": [2.0],
                  "lif_threshold": [-1.0, "auto"], "learn_alpha": ["no"], "spike_keys_values": [None]}),
    dict(fn=encoder_config, args=(40,), kwargs={"d_model": 16, "n_heads": 2},
         invalid={"vocab_size": [0, 2.5], "d_model": [0], "n_heads": [3], "max_seq_len": [0]}),
    dict(fn=SpikeLM, args=(CONFIG,), kwargs={"spiking": SpikeLMConfig(time_steps=2)},
         invalid={"config": ["tiny"], "spiking": ["elastic", {"neuron": "elastic"}]}),
    dict(fn=SpikingAttention, args=(CONFIG,), kwargs={"spiking": SpikeLMConfig()},
         invalid={"config": [None], "spiking": ["binary"]}),
    dict(fn=SpikingMLP, args=(CONFIG,), kwargs={"spiking": SpikeLMConfig()}, invalid={"config": [1], "spiking": [None]}),
    dict(fn=firing_rates, args=(MODEL,), invalid={"model": ["model", torch.nn.Linear(2, 2)]}),
    dict(fn=energy_estimate, args=(MODEL,), kwargs={"seq_len": 16, "tokens": 64},
         invalid={"model": [None], "seq_len": [0, 1.5], "tokens": [0, "64"]}),
    dict(fn=MaskedCharCorpus, args=(TEXTS,), kwargs={"seq_len": 16, "held_out_every": 3, "mask_prob": 0.15},
         invalid={"texts": ["one string", [1, 2]], "seq_len": [1, 10_000], "held_out_every": [1],
                  "mask_prob": [0.0, 1.0], "val_every": [1, -2, 2.0, True]}),
    dict(fn=evaluate_masked_lm, args=(MODEL, EVAL_IDS, EVAL_LABELS), kwargs={"batch_size": 2},
         invalid={"batch_size": [0], "labels": [EVAL_LABELS[:, :3]]}),
    dict(fn=train_masked_lm, args=(MODEL, CORPUS, TrainConfig(steps=1)), kwargs={"batch_size": 2},
         invalid={"corpus": [TEXTS], "config": [{"steps": 1}], "batch_size": [0]}),
]
