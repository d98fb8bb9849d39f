"""SpikeLM's neurons and spiking transformer: closed forms, a naive reference, snntorch, invariants."""

from __future__ import annotations

import math

import pytest
import torch

from icml24.language import TransformerLM
from icml24.language.spikelm import (
    E_AC_PJ,
    E_MAC_PJ,
    BinaryLIF,
    ElasticBiSpiking,
    SpikeLM,
    SpikeLMConfig,
    atan_spike,
    elastic_bi_spike,
    encoder_config,
    energy_estimate,
    firing_rates,
)


# ------------------------------------------------------------------------------------------ the spike
def test_elastic_bi_spike_closed_form_on_a_grid():
    alpha = 0.7
    u = torch.linspace(-2.0, 2.0, 401, dtype=torch.float64)
    s = elastic_bi_spike(u, alpha)
    # Threshold alpha / 2 on either side, saturation at +-alpha.
    expected = (u > alpha / 2).to(torch.float64) * alpha - (u < -alpha / 2).to(torch.float64) * alpha
    off_tie = (u.abs() - alpha / 2).abs() > 1e-9  # round-half-to-even at exactly alpha / 2
    assert torch.equal(s[off_tie], expected[off_tie])
    assert set(torch.unique(s).tolist()) <= {-alpha, 0.0, alpha}


def test_straight_through_gradient_is_one_inside_and_zero_outside():
    alpha = torch.tensor(0.5, dtype=torch.float64)
    u = torch.linspace(-1.5, 1.5, 301, dtype=torch.float64, requires_grad=True)
    elastic_bi_spike(u, alpha).sum().backward()
    inside = (u.detach() / alpha).abs() <= 1
    assert torch.equal(u.grad, inside.to(torch.float64))


def test_lsq_gradient_of_alpha_by_hand():
    u = torch.tensor([0.2, -0.9, 3.0, -4.0], dtype=torch.float64)
    alpha = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    elastic_bi_spike(u, alpha).sum().backward()
    # Inside: round(q) - q = -0.2 and -1 + 0.9 = -0.1; outside: sign(q) = +1 and -1; scale 1 / sqrt(4).
    assert alpha.grad.item() == pytest.approx((-0.2 - 0.1 + 1.0 - 1.0) / 2)


def test_accumulate_only_identity_in_float64():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(7, 11, generator=g, dtype=torch.float64)
    alpha = 0.37
    s = elastic_bi_spike(torch.randn(11, generator=g, dtype=torch.float64), alpha)
    plus, minus = s > 0, s < 0
    accumulated = alpha * (w[:, plus].sum(1) - w[:, minus].sum(1))
    assert torch.allclose(w @ s, accumulated, rtol=0, atol=1e-12)


def test_atan_surrogate_matches_its_formula():
    v = torch.linspace(-1, 1, 21, dtype=torch.float64, requires_grad=True)
    out = atan_spike(v, 2.0)
    assert torch.equal(out.detach(), (v.detach() > 0).to(torch.float64))
    out.sum().backward()
    assert torch.allclose(v.grad, 1.0 / (1 + (math.pi * v.detach()) ** 2))


# ------------------------------------------------------------------------------------------ the neurons
def _naive_elastic(x: torch.Tensor, alphas: list[float], decay: float = 0.25) -> torch.Tensor:
    """The code's SpikeLinear neuron written out element by element (time-major input (T, n))."""
    t_steps, n = x.shape
    out = torch.zeros_like(x)
    for i in range(n):
        u_prev, s_prev = 0.0, 0.0
        for t in range(t_steps):
            u = float(x[t, i]) if t == 0 else decay * (alphas[t - 1] - s_prev) * u_prev + float(x[t, i])
            q = max(-1.0, min(1.0, round(u / alphas[t])))
            out[t, i] = q * alphas[t]
            u_prev, s_prev = u, out[t, i].item()
    return out


def test_elastic_neuron_matches_a_naive_loop_and_initialises_alpha_once():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 200, generator=g, dtype=torch.float64).abs() * torch.sign(torch.randn(1, 200, generator=g))
    x = x.to(torch.float32)
    neuron = ElasticBiSpiking(time_steps=4, alpha_init_factor=2.0)
    s = neuron(x.reshape(-1, 1))  # (T * B, 1) with B = 200 samples of one feature
    alphas = neuron.alpha.detach().tolist()
    assert all(a > 0 for a in alphas)
    assert alphas[0] == pytest.approx(2 * float(x[0].abs().mean()), rel=1e-6)  # alpha_1 = 2 mean|u_1| = 2 mean|x_1|
    ref = _naive_elastic(x.to(torch.float64), alphas)
    assert torch.allclose(s.view(4, 200).to(torch.float64), ref, atol=1e-6)
    # A second batch leaves alpha unchanged (initialised exactly once).
    neuron(torch.randn(8, 3, generator=g) * 10)
    assert neuron.alpha.detach().tolist() == alphas
    assert bool(neuron.initialized)


def test_membrane_carry_changes_the_input_for_more_than_one_step():
    neuron = ElasticBiSpiking(time_steps=2)
    x = torch.full((2, 1), 0.3)
    with torch.no_grad():
        neuron.alpha.copy_(torch.tensor([1.0, 1.0]))
        neuron.initialized.fill_(True)
    s = neuron(x)
    # Step 1: round(0.3) = 0; step 2: u = 0.25 * (1 - 0) * 0.3 + 0.3 = 0.375 -> still 0; a one-step ANN would give 0.3.
    assert s.tolist() == [[0.0], [0.0]]
    x = torch.full((2, 1), 0.45)
    s = neuron(x)  # u_2 = 0.25 * 0.45 + 0.45 = 0.5625 -> fires although x < 0.5
    assert s.tolist() == [[0.0], [1.0]]


def test_fixed_amplitude_is_ternary_with_unit_amplitude():
    neuron = ElasticBiSpiking(time_steps=4, amplitude="fixed")
    s = neuron(torch.randn(4 * 16, 8) * 3)
    assert set(torch.unique(s).tolist()) <= {-1.0, 0.0, 1.0}
    assert neuron.alpha.detach().tolist() == [1.0] * 4


@pytest.mark.parametrize("dynamics", [False, True])
def test_firing_rate_is_monotone_in_the_frequency_knob(dynamics):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4 * 64, 32, generator=g)
    rates = []
    for k in (0.5, 1.0, 2.0, 4.0, 8.0):
        neuron = ElasticBiSpiking(time_steps=4, alpha_init_factor=k, dynamics=dynamics)
        neuron.recording = True
        neuron(x)
        rates.append(neuron.firing_rate)
    assert all(a >= b for a, b in zip(rates, rates[1:])), rates
    assert rates[0] > rates[-1]


@pytest.mark.parametrize("make", [lambda: ElasticBiSpiking(time_steps=4), lambda: BinaryLIF(time_steps=4)])
def test_zero_input_never_fires(make):
    neuron = make()
    neuron.recording = True
    out = neuron(torch.zeros(8, 5))
    assert torch.count_nonzero(out) == 0 and neuron.firing_rate == 0.0


def test_binary_lif_hand_computed():
    lif = BinaryLIF(time_steps=4, beta=0.5, threshold=1.0, reset="zero")
    x = torch.tensor([[0.6], [0.6], [0.6], [0.6]])
    # u: 0.6 -> 0.9 -> 1.05 (fires) -> reset: 0.6.
    assert lif(x).view(-1).tolist() == [0.0, 0.0, 1.0, 0.0]
    lif = BinaryLIF(time_steps=4, beta=1.0, threshold=1.0, reset="subtract")
    # Integrate-and-fire with soft reset: 0.6, 1.2 (fires), 0.8, 1.4 (fires).
    assert lif(x).view(-1).tolist() == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("reset", ["zero", "subtract"])
def test_binary_lif_matches_snntorch_leaky(reset):
    snn = pytest.importorskip("snntorch")
    g = torch.Generator().manual_seed(3)
    steps, batch, width = 6, 5, 7
    x = (torch.randn(steps, batch, width, generator=g, dtype=torch.float64) * 0.8 + 0.5).requires_grad_(True)
    ours = BinaryLIF(time_steps=steps, beta=0.7, threshold=1.0, reset=reset, surrogate_slope=2.0)
    s_ours = ours(x.reshape(steps * batch, width)).view(steps, batch, width)
    (s_ours * torch.linspace(0.5, 1.5, width, dtype=torch.float64)).sum().backward()
    grad_ours = x.grad.clone()
    x.grad = None
    ref = snn.Leaky(beta=0.7, threshold=1.0, reset_mechanism=reset, spike_grad=snn.surrogate.atan(alpha=2.0))
    mem = torch.zeros(batch, width, dtype=torch.float64)
    s_ref = []
    for t in range(steps):
        spk, mem = ref(x[t], mem)
        s_ref.append(spk)
    s_ref = torch.stack(s_ref)
    (s_ref * torch.linspace(0.5, 1.5, width, dtype=torch.float64)).sum().backward()
    assert torch.equal(s_ours, s_ref)
    assert s_ours.sum() > 0  # the comparison saw spikes
    assert torch.allclose(grad_ours, x.grad, atol=1e-12)


def test_neurons_reject_a_leading_axis_that_does_not_fold_time():
    with pytest.raises(ValueError, match="time_steps"):
        ElasticBiSpiking(time_steps=4)(torch.zeros(6, 2))
    with pytest.raises(ValueError, match="amplitude"):
        ElasticBiSpiking(amplitude="learned")
    with pytest.raises(ValueError, match="beta"):
        BinaryLIF(beta=1.5)


# ------------------------------------------------------------------------------------------ the model
def _tiny(neuron: str, steps: int = 4, **kw) -> SpikeLM:
    torch.manual_seed(0)
    cfg = encoder_config(20, d_model=16, n_layers=2, n_heads=2, d_ff=32, max_seq_len=12)
    return SpikeLM(cfg, spiking=SpikeLMConfig(neuron=neuron, time_steps=steps, **kw))


def test_ann_variant_is_the_shared_transformer():
    model = _tiny("none")
    plain = TransformerLM(model.config)
    plain.load_state_dict(model.state_dict())
    ids = torch.randint(0, 20, (3, 12), generator=torch.Generator().manual_seed(0))
    assert torch.allclose(model(ids), plain(ids), atol=1e-6)


@pytest.mark.parametrize("steps", [1, 2, 4, 8])
def test_time_axis_bookkeeping_with_neurons_bypassed(steps):
    model = _tiny("elastic", steps=steps)
    plain = TransformerLM(model.config)
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if "neuron" not in k})
    for name in list(model.neurons()):
        parent, attr = name.rsplit(".", 1)
        setattr(model.get_submodule(parent), attr, torch.nn.Identity())
    ids = torch.randint(0, 20, (3, 12), generator=torch.Generator().manual_seed(1))
    assert torch.allclose(model(ids), plain(ids), atol=1e-5)


def test_samples_do_not_mix_across_the_folded_time_axis():
    model = _tiny("elastic").eval()
    ids = torch.randint(0, 20, (4, 12), generator=torch.Generator().manual_seed(2))
    model(ids)  # initialises alpha
    both = model(ids)
    alone = torch.cat([model(ids[i : i + 1]) for i in range(4)])
    assert torch.allclose(both, alone, atol=1e-5)


@pytest.mark.parametrize("neuron", ["elastic", "ternary", "binary"])
def test_every_matrix_product_sees_spikes_and_gradients_reach_all_weights(neuron):
    model = _tiny(neuron)
    ids = torch.randint(0, 20, (4, 12), generator=torch.Generator().manual_seed(3))
    model.record_spikes()
    model(ids).logsumexp(-1).mean().backward()
    names = set(firing_rates(model))
    for i in range(2):
        for site in ("self_attn.input", "self_attn.key", "self_attn.value", "self_attn.output", "mlp.input", "mlp.hidden"):
            assert f"layers.{i}.{site}_neuron" in names
    for name in ("layers.0.self_attn.q_proj.weight", "layers.0.mlp.up_proj.weight", "embed_tokens.weight"):
        assert model.get_parameter(name).grad is not None
    # The surrogate / straight-through gradient reaches the value projection even through silent neurons.
    assert model.get_parameter("layers.1.self_attn.v_proj.weight").grad.abs().sum() > 0
    if neuron == "elastic":
        assert model.get_parameter("layers.1.self_attn.q_proj.weight").grad.abs().sum() > 0
        # The data-initialised amplitude makes every site fire at initialisation; the fixed thresholds of the
        # baselines (0.5, 1) are far above the ~0.1-scale projections of an N(0, 0.02) network, so their
        # deeper sites start silent (their weights then get gradient only through the surrogate).
        assert model.get_parameter("layers.1.mlp.down_proj.weight").grad.abs().sum() > 0
        assert min(firing_rates(model).values()) > 0.05
    if neuron == "elastic":
        n = model.layers[0].self_attn.key_neuron
        assert not n.dynamics and model.layers[0].self_attn.input_neuron.dynamics


def test_energy_estimate_by_hand():
    model = _tiny("elastic")
    ids = torch.randint(0, 20, (2, 12), generator=torch.Generator().manual_seed(4))
    model.record_spikes()
    model(ids)
    c = model.config
    out = energy_estimate(model, seq_len=12, tokens=24)
    # ANN: q, k, v, o (4 d^2) + up, down (2 d d_ff) + QK^T and AV (2 L d) per layer.
    mac = c.n_layers * (4 * 16 * 16 + 2 * 16 * 32 + 2 * 12 * 16)
    assert out["mac_per_token"] == mac
    fan = {"input": 48, "key": 12, "value": 12, "output": 16}
    ac = 0
    for name, n in model.neurons().items():
        site = name.rsplit(".", 1)[1].replace("_neuron", "")
        ac += n.spike_count * (fan[site] if "self_attn" in name else (32 if site == "input" else 16))
    assert out["ac_per_token"] == pytest.approx(ac / 24)
    assert out["energy_ratio"] == pytest.approx(ac / 24 * E_AC_PJ / (mac * E_MAC_PJ))
    with pytest.raises(ValueError, match="record_spikes"):
        energy_estimate(_tiny("binary"), seq_len=12, tokens=24)


def test_binary_lif_data_threshold_is_set_once_and_saved():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4 * 8, 6, generator=g) * 0.1
    lif = BinaryLIF(time_steps=4, threshold="data")
    lif.recording = True
    lif(x)
    assert lif.threshold == pytest.approx(float(x[:8].abs().mean()), rel=1e-6)
    assert 0 < lif.firing_rate < 1  # fires at a 0.1 activation scale, where threshold 1 would not
    theta = lif.threshold
    lif(x * 50)
    assert lif.threshold == theta
    other = BinaryLIF(time_steps=4, threshold="data")
    other.load_state_dict(lif.state_dict())
    assert other.threshold == pytest.approx(theta) and bool(other.initialized)
    assert torch.count_nonzero(BinaryLIF(time_steps=4, threshold="data")(torch.zeros(8, 3))) == 0
