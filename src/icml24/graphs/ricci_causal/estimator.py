"""A GCN effect estimator on networked units (TARNet heads on a graph representation, the NetDeconf family).

Farzam, Tannenbaum, Sapiro, ICML 2024 (PMLR 235:13086-13108) study GNN-based effect estimators: a representation
``Phi(X, A)`` of each unit learnt by message passing, with one outcome head per treatment arm, fitted on factual
outcomes (Shalit et al. 2017's TARNet on a graph; Guo et al. 2020's NetDeconf adds a balancing penalty, omitted here):

    h = ReLU(GCN_2(ReLU(GCN_1(X, A_w)), A_w)),   y_hat_i(t) = head_t(h_i),   loss = mean_{i in train} (y_hat_i(t_i) - y_i)^2
    tau_hat_i = y_hat_i(1) - y_hat_i(0)

``GCN`` is torch-geometric's ``GCNConv`` (Kipf & Welling 2017): symmetric normalisation of ``A_w + I`` with per-edge
message weights ``A_w``; the Ricci-flow preprocessing of the paper enters only through these weights. With no edges
the representation is a per-node MLP, so the estimator reduces to a TARNet on the covariates alone.
"""

from __future__ import annotations

import numpy as np
import torch

from icml24.common.validation import positive_int
from icml24.graphs.ricci_causal.curvature import as_edge_array, float_array

__all__ = ["GCNEffectEstimator"]


class _TARGCN(torch.nn.Module):
    def __init__(self, in_dim: int, hidden: int, skip: bool):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv1 = GCNConv(in_dim, hidden, cached=True)
        self.conv2 = GCNConv(hidden, hidden, cached=True)
        self.root = torch.nn.Linear(in_dim, hidden) if skip else None
        width = 2 * hidden if skip else hidden
        self.heads = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
            for _ in range(2)
        )

    def forward(self, x, edge_index, edge_weight):
        h = torch.relu(self.conv1(x, edge_index, edge_weight))
        h = torch.relu(self.conv2(h, edge_index, edge_weight))
        if self.root is not None:
            # The unit's own covariates beside the aggregate: GCN's self-loop alone gives them weight 1/(deg+1).
            h = torch.cat([h, torch.relu(self.root(x))], dim=1)
        return torch.cat([head(h) for head in self.heads], dim=1)  # (n, 2): y_hat(0), y_hat(1)


def _positive_float(name: str, value, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name}: expected a {'non-negative' if allow_zero else 'positive'} number, got {value!r}")
    return float(value)


class GCNEffectEstimator:
    """Two-layer GCN representation with two outcome heads, trained transductively on the factual outcomes of the
    nodes in ``train_mask`` (module docstring).

    Args:
        hidden: width of the representation and of the heads.
        epochs: full-batch Adam steps.
        lr: Adam learning rate.
        weight_decay: Adam's L2 penalty.
        skip: concatenate a linear embedding of the unit's own covariates to the GCN representation (a root
            weight, as in GraphSAGE); ``False`` is the plain GCN.
        val_fraction: share of the training nodes held out to pick the epoch (lowest factual validation MSE, the
            usual model selection of TARNet/NetDeconf, which see factual outcomes only); 0 trains on all of them
            and keeps the last epoch.
        seed: seeds the initialisation and the validation split (results are deterministic on CPU for a given seed).
    """

    def __init__(self, *, hidden: int = 16, epochs: int = 300, lr: float = 1e-3, weight_decay: float = 1e-2,
                 skip: bool = True, val_fraction: float = 0.2, seed: int = 0):  # fmt: skip
        self.hidden = hidden
        self.val_fraction = val_fraction
        self.skip = skip
        self.epochs = epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.seed = seed

    def fit(self, x, t, y, graph, *, num_nodes: int | None = None, edge_weight=None, train_mask=None):
        """Fit on the factual outcomes ``y`` of the nodes in ``train_mask`` (all nodes when ``None``).

        Args:
            x: ``(n, d)`` covariates of every node.
            t: ``(n,)`` treatments in {0, 1}.
            y: ``(n,)`` factual outcomes (only the training nodes' are used).
            graph: the network (networkx graph or edge array, see ``as_edge_array``).
            edge_weight: ``(E,)`` positive message weights in the edge order of ``as_edge_array``; ``None``: all 1.
            train_mask: ``(n,)`` booleans, the nodes whose outcomes the estimator may see.
        """
        hidden = positive_int(self.hidden, "hidden")
        epochs = positive_int(self.epochs, "epochs")
        lr = _positive_float("lr", self.lr)
        wd = _positive_float("weight_decay", self.weight_decay, allow_zero=True)
        vf = self.val_fraction
        if isinstance(vf, bool) or not isinstance(vf, (int, float)) or not 0 <= vf < 1:
            raise ValueError(f"val_fraction: expected a number in [0, 1), got {vf!r}")
        if not isinstance(self.skip, bool):
            raise TypeError(f"skip: expected True or False, got {self.skip!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise ValueError(f"seed: expected an int, got {self.seed!r}")
        xa = float_array("x", x).astype(np.float32)
        if xa.ndim != 2 or not np.all(np.isfinite(xa)):
            raise ValueError(f"x: expected a finite (n, d) array, got shape {xa.shape}")
        n = len(xa)
        edges, n_graph = as_edge_array(graph, num_nodes)
        if n_graph > n or (hasattr(graph, "number_of_nodes") and n_graph != n):
            raise ValueError(f"x and graph disagree: x has {n} rows, the graph {n_graph} nodes")
        ta = np.asarray(t)
        if ta.shape != (n,) or not np.all(np.isin(ta, (0, 1))):
            raise ValueError(f"t: expected ({n},) treatments in {{0, 1}}, got shape {ta.shape}")
        ya = float_array("y", y)
        if ya.shape != (n,) or not np.all(np.isfinite(ya)):
            raise ValueError(f"y: expected ({n},) finite outcomes, got shape {ya.shape}")
        mask = np.ones(n, bool) if train_mask is None else np.asarray(train_mask)
        if mask.shape != (n,) or mask.dtype != bool or not mask.any():
            raise ValueError(f"train_mask: expected ({n},) booleans with at least one True")
        if edge_weight is None:
            ew = np.ones(len(edges))
        else:
            ew = float_array("edge_weight", edge_weight)
            if ew.shape != (len(edges),) or not np.all(np.isfinite(ew)) or np.any(ew <= 0):
                raise ValueError(f"edge_weight: expected ({len(edges)},) positive finite weights, got shape {ew.shape}")
        idx = np.flatnonzero(mask)
        rng = np.random.default_rng(int(self.seed))
        n_val = int(round(vf * len(idx)))
        val = rng.choice(idx, size=n_val, replace=False) if n_val and n_val < len(idx) else idx[:0]
        fit_idx = np.setdiff1d(idx, val)
        self.y_mean_, self.y_scale_ = float(ya[fit_idx].mean()), float(ya[fit_idx].std() or 1.0)
        ei = torch.as_tensor(np.concatenate([edges, edges[:, ::-1]]).T.copy(), dtype=torch.long)
        ewt = torch.as_tensor(np.concatenate([ew, ew]), dtype=torch.float32)
        xt = torch.as_tensor(xa)
        yt = torch.as_tensor((ya - self.y_mean_) / self.y_scale_, dtype=torch.float32)
        tt = torch.as_tensor(ta, dtype=torch.long)
        fit_t, val_t = torch.as_tensor(fit_idx), torch.as_tensor(val)
        torch.manual_seed(int(self.seed))
        model = _TARGCN(xa.shape[1], hidden, self.skip)
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)

        def factual_mse(out, nodes):
            return torch.mean((out[nodes].gather(1, tt[nodes, None]).squeeze(1) - yt[nodes]) ** 2)

        best, best_state, best_epoch = float("inf"), None, epochs
        for epoch in range(epochs):
            model.train()
            opt.zero_grad()
            loss = factual_mse(model(xt, ei, ewt), fit_t)
            loss.backward()
            opt.step()
            if len(val):
                with torch.no_grad():
                    v = float(factual_mse(model(xt, ei, ewt), val_t))
                if v < best:
                    best, best_epoch = v, epoch + 1
                    best_state = {k: p.detach().clone() for k, p in model.state_dict().items()}
        if best_state is not None:
            model.load_state_dict(best_state)
        self.model_, self._graph = model, (xt, ei, ewt)
        self.train_loss_ = float(loss.detach())
        self.best_epoch_ = best_epoch
        return self

    def predict_potential_outcomes(self) -> np.ndarray:
        """``(n, 2)``: ``y_hat_i(0), y_hat_i(1)`` for every node of the fitted graph, on the outcome's scale."""
        if not hasattr(self, "model_"):
            raise RuntimeError("GCNEffectEstimator: call fit before predicting")
        with torch.no_grad():
            out = self.model_(*self._graph).numpy().astype(float)
        return out * self.y_scale_ + self.y_mean_

    def predict_ite(self) -> np.ndarray:
        """``(n,)``: the estimated individual effects ``tau_hat_i = y_hat_i(1) - y_hat_i(0)``."""
        po = self.predict_potential_outcomes()
        return po[:, 1] - po[:, 0]
