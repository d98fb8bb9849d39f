"""Byzantine attacks and client partitions."""

import numpy as np
import pytest

from icml24.conformal.rob_fcp import (
    apply_attack,
    coverage_attack,
    dirichlet_label_split,
    efficiency_attack,
    gaussian_noise_attack,
    iid_split,
)


def honest(k=6, n=20, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(size=n) for _ in range(k)]


def test_point_mass_attacks():
    np.testing.assert_array_equal(coverage_attack(np.array([0.3, 0.7])), [0.0, 0.0])
    np.testing.assert_array_equal(efficiency_attack(np.array([0.3, 0.7])), [1.0, 1.0])


def test_noise_attack_stays_in_bounds_and_is_seeded():
    s = np.full(1000, 0.5)
    a = gaussian_noise_attack(s, 0.5, rng=3)
    assert a.min() >= 0 and a.max() <= 1
    assert (a == 0).any() and (a == 1).any()  # sigma = 0.5 reaches both clips
    np.testing.assert_array_equal(a, gaussian_noise_attack(s, 0.5, rng=3))
    with pytest.raises(ValueError, match="sigma"):
        gaussian_noise_attack(s, -1.0)


@pytest.mark.parametrize("attack", ["none", "coverage", "efficiency", "gaussian_noise", "copy"])
def test_apply_attack_touches_only_malicious_clients(attack):
    clients = honest()
    out = apply_attack(clients, [1, 4], attack, rng=0)
    for k in (0, 2, 3, 5):
        np.testing.assert_array_equal(out[k], clients[k])
    if attack == "copy":
        src = [k for k in (0, 2, 3, 5) if np.array_equal(out[1], clients[k])]
        assert len(src) == 1 and np.array_equal(out[4], clients[src[0]])
    if attack == "coverage":
        assert (out[1] == 0).all() and (out[4] == 0).all()


def test_apply_attack_bad_input():
    with pytest.raises(ValueError, match="attack"):
        apply_attack(honest(), [1], "flip")
    with pytest.raises(ValueError, match="indices"):
        apply_attack(honest(), [7], "coverage")
    with pytest.raises(ValueError, match="copy_target"):
        apply_attack(honest(), [1], "copy", copy_target=1)


def test_iid_split_partitions_evenly():
    parts = iid_split(103, 10, rng=0)
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(103))
    assert {p.size for p in parts} == {10, 11}
    with pytest.raises(ValueError, match="exceeds"):
        iid_split(5, 6)


def test_dirichlet_split_partitions_and_skews():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, size=2000)
    parts = dirichlet_label_split(y, 10, 0.5, rng=1)
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(2000))
    assert min(p.size for p in parts) >= 10

    def skew(beta):
        ps = dirichlet_label_split(y, 10, beta, rng=2)
        mix = np.array([np.bincount(y[p], minlength=10) / p.size for p in ps])
        return np.abs(mix - 0.1).sum(axis=1).mean()  # mean L1 distance from the uniform label mix

    assert skew(0.1) > skew(100.0)
    with pytest.raises(ValueError, match="beta"):
        dirichlet_label_split(y, 10, 0.0)
    with pytest.raises(ValueError, match="integer"):
        dirichlet_label_split(y.astype(float), 10)
