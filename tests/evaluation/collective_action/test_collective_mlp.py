"""The SGD-trained MLP learners: ERM limits, determinism, weights and history."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from icml24.evaluation.collective_action import PatchSignal, plant_collective, train_mlp


@pytest.fixture(scope="module")
def data():
    torch.set_num_threads(1)
    X, y = load_digits(return_X_y=True)
    return X[:500] / 16, y[:500]


def _params(run):
    return torch.cat([p.detach().flatten() for p in run.model.parameters()])


def test_jtt_with_upweight_one_and_cvar_with_rho_one_are_erm_bit_for_bit(data):
    X, y = data
    erm = train_mlp(X, y, method="erm", epochs=2, seed=3)
    jtt = train_mlp(X, y, method="jtt", upweight=1.0, epochs=2, seed=3)
    cvar = train_mlp(X, y, method="cvar", rho=1.0, epochs=2, seed=3)
    assert torch.equal(_params(erm), _params(jtt)) and torch.equal(_params(erm), _params(cvar))
    again = train_mlp(X, y, method="erm", epochs=2, seed=3)
    assert torch.equal(_params(erm), _params(again))  # same seed, same run


def test_weights_history_and_learning(data):
    X, y = data
    g = PatchSignal.corner(8, 8)
    d = plant_collective(X, y, g, alpha=0.02, target=0, random_state=0)
    for method in ("erm", "jtt", "cvar", "lff"):
        run = train_mlp(d.X, d.y, method=method, epochs=4, seed=0, eval_sets={"train": d.X})
        assert len(run.history["train"]) == 4 and run.weights.shape == (len(y),)
        assert np.all(run.weights >= 0) and np.isfinite(run.weights).all()
        # four epochs: ERM fits most of the data; the re-weighted objectives learn more slowly
        assert np.mean(run.history["train"][-1] == d.y) > (0.6 if method == "erm" else 0.3), method
    jtt = train_mlp(d.X, d.y, method="jtt", upweight=5.0, epochs=2, seed=0)
    assert set(np.unique(jtt.weights)) <= {1.0, 5.0} and np.array_equal(jtt.weights == 5.0, jtt.error_set)


def test_bad_arguments_are_named(data):
    X, y = data
    with pytest.raises(ValueError, match="method"):
        train_mlp(X, y, method="sgd")
    with pytest.raises(ValueError, match="rho"):
        train_mlp(X, y, method="cvar", rho=0.0)
    with pytest.raises(ValueError, match="eval_sets"):
        train_mlp(X, y, eval_sets={"v": X[:, :3]})
