"""The models: (k,1)-GT with LPE / SPE, the Edge Transformer, and GIN (the 1-WL baseline).

* :class:`TupleGT` is the (2,1)-GT / (3,1)-GT of Müller & Morris, *Aligning Transformers with
  Weisfeiler-Leman* (ICML 2024, https://arxiv.org/abs/2406.03148; the (k,s)-GT): a standard pre-LN
  transformer over node-pair (or connected-triple) tokens. A token ``(v_1, ..., v_k)`` is embedded as

      sum_{i<j} [v_i v_j in E] e  +  Lin([PE_v1 || ... || PE_vk])  +  Lin([x_v1 || ...])  +  Lin([deg_v1 || ...])

  with a learnable graph token prepended whose final state is read out. Node PEs are adjacency-identifying
  encodings of the Laplacian eigenpairs: LPE (a DeepSets over ``(v_ij, lambda_j)``, random sign flips
  in training) or SPE (``V diag(psi(lambda)) V^T`` followed by a GIN; basis invariant).
* :class:`EdgeTransformer` (Müller, Kusuma, Bonet & Morris, NeurIPS 2024, arXiv 2401.10119, after
  Bergen et al. 2021): a state per node pair and triangular attention
  ``a_ijl = softmax_l(<Q X_il, K X_lj> / sqrt(d_k))``, ``out_ij = O(sum_l a_ijl V1 X_il * V2 X_lj)``;
  3-WL expressive without positional encodings.
* :class:`GIN` (Xu et al., 2019) from torch-geometric's ``GINConv``: bounded by 1-WL.

All take a batch of :class:`~icml24.graphs.wl_transformers.tokens.TokenizedGraph` (PyG ``Batch``) and
return one row per graph. Constructors are keyword-only.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GINConv, global_add_pool
from torch_geometric.utils import to_dense_adj, to_dense_batch

PE_KINDS = ("lpe", "spe", "none")


def _check_pos(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _check_rate(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a float in [0, 1), got {value!r}")
    return float(value)


def _batch_vector(data) -> torch.Tensor:
    batch = getattr(data, "batch", None)
    if batch is None:
        return torch.zeros(data.num_nodes, dtype=torch.long, device=data.x.device)
    return batch


def _num_graphs(data) -> int:
    return int(getattr(data, "num_graphs", 1) or 1)


class LaplacianPE(nn.Module):
    """LPE: ``rho(sum_j phi(v_ij, lambda_j))`` over the node's eigenvector entries (official ``EigenEmbedding``).

    ``phi: R^2 -> R^2e -> R^e`` and ``rho: R^e -> R^2e -> R^e`` with ReLU; padded eigenpairs (NaN,
    graphs with fewer nodes than eigenpairs) are left out of the sum. In training each eigenvector's
    sign is flipped at random (the eigenvectors are defined up to sign), so the encoding is invariant to
    sign only in expectation; it is not invariant to the choice of basis of a repeated eigenvalue.
    """

    def __init__(self, *, num_eigs: int, dim: int) -> None:
        super().__init__()
        self.num_eigs = _check_pos("num_eigs", num_eigs)
        dim = _check_pos("dim", dim)
        self.phi = nn.Sequential(nn.Linear(2, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim), nn.ReLU())
        self.rho = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim), nn.ReLU())
        # Not in the official LPE: without a norm the PE's graph-to-graph variation (std ~0.005 at
        # initialisation on CSL) is drowned by the shared token parts, and our small models stayed at chance.
        self.norm = nn.BatchNorm1d(dim)

    def forward(self, data) -> torch.Tensor:
        vecs, vals = data.eigvecs[:, : self.num_eigs], data.eigvals[:, : self.num_eigs]
        if self.training:
            batch = _batch_vector(data)
            signs = torch.randint(0, 2, (_num_graphs(data), vecs.size(1)), device=vecs.device) * 2 - 1
            vecs = vecs * signs[batch].to(vecs.dtype)
        real = ~torch.isnan(vecs)
        x = torch.stack([torch.nan_to_num(vecs), torch.nan_to_num(vals)], -1)
        return self.norm(self.rho((self.phi(x) * real.unsqueeze(-1)).sum(1)))


class SignNetSPE(nn.Module):
    """SPE (Huang et al., 2024) as in the official ``EquivariantEigenEmbedding``: per channel ``c``,
    ``P_c = V diag(psi_c(lambda)) V^T`` (an n x n matrix, invariant to sign and basis of the eigenvectors
    when the kept eigenpairs are whole eigenspaces: a cut eigenspace breaks the basis invariance),
    then a GIN over the nodes with the rows ``P[i, :, :]`` as features, summed over the row index.
    """

    def __init__(self, *, num_eigs: int, dim: int, channels: int = 8, gin_layers: int = 2) -> None:
        super().__init__()
        self.num_eigs = _check_pos("num_eigs", num_eigs)
        dim, channels = _check_pos("dim", dim), _check_pos("channels", channels)
        self.psi = nn.Sequential(nn.Linear(1, dim), nn.ReLU(), nn.Linear(dim, channels))
        layers, width = [], channels
        for _ in range(_check_pos("gin_layers", gin_layers)):
            layers.append(nn.Sequential(nn.Linear(width, dim), nn.ReLU(), nn.Linear(dim, dim)))
            width = dim
        self.gin = nn.ModuleList(layers)
        self.out = nn.Linear(dim, dim)
        self.norm = nn.BatchNorm1d(dim)  # as for LPE (the official SPE normalises inside psi instead)

    def forward(self, data) -> torch.Tensor:
        batch = _batch_vector(data)
        vecs, mask = to_dense_batch(data.eigvecs[:, : self.num_eigs], batch)  # B, N, K
        vals, _ = to_dense_batch(data.eigvals[:, : self.num_eigs], batch)
        vals = vals[:, 0, :]  # B, K (the same on every node)
        real = ~torch.isnan(vals)
        weights = self.psi(torch.nan_to_num(vals).unsqueeze(-1)) * real.unsqueeze(-1)  # B, K, C
        vecs = torch.nan_to_num(vecs)
        p = torch.einsum("bik,bkc,bjk->bijc", vecs, weights, vecs)  # B, N, N, C
        pair_mask = (mask.unsqueeze(2) & mask.unsqueeze(1)).unsqueeze(-1)
        adj = to_dense_adj(data.edge_index, batch, max_num_nodes=vecs.size(1))  # B, N, N
        h = p
        for layer in self.gin:
            h = layer(h + torch.einsum("bik,bkjc->bijc", adj, h)) * pair_mask
        pe = self.out((h * pair_mask).sum(2))  # B, N, d
        return self.norm(pe[mask])


class _PreLNBlock(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float, attention_dropout: float) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=attention_dropout, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.drop(self.attn(h, h, h, key_padding_mask=pad, need_weights=False)[0])
        return x + self.drop(self.ffn(self.ln2(x)))


class TupleGT(nn.Module):
    """The (k,1)-GT: a standard transformer on (2,1) node-and-edge tokens or (3,1) connected triples.

    Args:
        order: 2 for the (2,1)-GT (tokens ``n + 2|E|``), 3 for the (3,1)-GT (connected triples).
        pe: ``"lpe"``, ``"spe"`` or ``"none"`` (no positional encoding: the tokens then carry degrees and
            edge flags only, which is what the PE-free ablation of the paper's theory predicts to be weak).
        dim, layers, heads: transformer width, depth and heads (code defaults 768, 12, 16; ours are small).
        num_eigs: eigenpairs fed to the PE (code default 96).
        out_dim: output width (classes or regression targets).
        max_degree: degrees are clipped to ``max_degree - 1`` before their embedding.
        dropout, attention_dropout: as in the official layer (0.1 and 0.1 there).
    """

    def __init__(
        self,
        *,
        order: int = 2,
        pe: str = "lpe",
        dim: int = 32,
        layers: int = 2,
        heads: int = 4,
        num_eigs: int = 16,
        out_dim: int = 1,
        max_degree: int = 64,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if isinstance(order, bool) or order not in (2, 3):
            raise ValueError(f"order must be 2 or 3, got {order!r}")
        if pe not in PE_KINDS:
            raise ValueError(f"pe must be one of {PE_KINDS}, got {pe!r}")
        dim, heads = _check_pos("dim", dim), _check_pos("heads", heads)
        if dim % heads:
            raise ValueError(f"dim must be divisible by heads, got dim={dim}, heads={heads}")
        _check_pos("layers", layers)
        _check_pos("out_dim", out_dim)
        self.order, self.pe_kind, self.max_degree = order, pe, _check_pos("max_degree", max_degree)
        self.pe = (LaplacianPE(num_eigs=num_eigs, dim=dim) if pe == "lpe"
                   else SignNetSPE(num_eigs=num_eigs, dim=dim) if pe == "spe" else None)  # fmt: skip
        self.pe_encoder = nn.Linear(order * dim, dim) if self.pe is not None else None
        self.node_embed = nn.Embedding(8, dim)
        self.node_encoder = nn.Linear(order * dim, dim)
        self.degree_embed = nn.Embedding(self.max_degree, dim)
        self.degree_encoder = nn.Linear(order * dim, dim)
        self.edge_embed = nn.Parameter(torch.randn(dim) * 0.1)
        self.graph_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.in_norm = nn.LayerNorm(dim)
        drop, adrop = _check_rate("dropout", dropout), _check_rate("attention_dropout", attention_dropout)
        self.blocks = nn.ModuleList(_PreLNBlock(dim, heads, drop, adrop) for _ in range(layers))
        self.out_norm = nn.LayerNorm(dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim), nn.Linear(dim, out_dim))

    def _concat(self, node_feats: torch.Tensor, token_index: torch.Tensor) -> torch.Tensor:
        return torch.cat([node_feats[token_index[i]] for i in range(self.order)], -1)

    def tokens(self, data) -> tuple[torch.Tensor, torch.Tensor]:
        """Token embeddings ``(B, 1 + T_max, d)`` with the graph token first, and the padding mask."""
        if data.token_index.size(0) != self.order:
            raise ValueError(f"data was tokenized for order {data.token_index.size(0)}, model has order {self.order}")
        idx = data.token_index
        x = self.node_embed(data.x.clamp(0, 7))
        deg = self.degree_embed(data.degree.clamp(0, self.max_degree - 1))
        tok = self.node_encoder(self._concat(x, idx)) + self.degree_encoder(self._concat(deg, idx))
        tok = tok + data.token_edges.sum(1, keepdim=True) * self.edge_embed
        if self.pe is not None:
            tok = tok + self.pe_encoder(self._concat(self.pe(data), idx))
        token_batch = _batch_vector(data)[idx[0]]
        dense, mask = to_dense_batch(tok, token_batch, batch_size=_num_graphs(data))
        dense = torch.cat([self.graph_token.expand(dense.size(0), 1, -1), dense], 1)
        mask = torch.cat([torch.ones_like(mask[:, :1]), mask], 1)
        return self.in_norm(dense), ~mask

    def forward(self, data) -> torch.Tensor:
        x, pad = self.tokens(data)
        for block in self.blocks:
            x = block(x, pad)
        return self.head(self.out_norm(x[:, 0]))


class TriangularAttention(nn.Module):
    """Multi-head triangular attention over pair states ``X`` of shape ``(B, N, N, d)``.

    ``a_ijl = softmax_l(<Q X_il, K X_lj> / sqrt(d_k))`` over real nodes ``l``;
    ``out_ij = O(sum_l a_ijl (V1 X_il) * (V2 X_lj))`` (elementwise product of the two value halves).
    """

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        dim, heads = _check_pos("dim", dim), _check_pos("heads", heads)
        if dim % heads:
            raise ValueError(f"dim must be divisible by heads, got dim={dim}, heads={heads}")
        self.heads, self.d_k = heads, dim // heads
        self.q, self.k, self.v1, self.v2, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(5))

    def forward(self, x: torch.Tensor, node_mask: torch.Tensor) -> torch.Tensor:
        b, n, _, d = x.shape

        def heads_first(t: torch.Tensor) -> torch.Tensor:  # (B, N, N, d) -> (B, H, d_k, N, N)
            return t.view(b, n, n, self.heads, self.d_k).permute(0, 3, 4, 1, 2)

        q, k, v1, v2 = heads_first(self.q(x)), heads_first(self.k(x)), heads_first(self.v1(x)), heads_first(self.v2(x))
        scores = torch.einsum("bhcil,bhclj->bhilj", q, k) / math.sqrt(self.d_k)  # (B, H, i, l, j)
        scores = scores.masked_fill(~node_mask[:, None, None, :, None], float("-inf"))
        att = torch.softmax(scores, dim=3)
        # out[b,h,c,i,j] = sum_l v1[b,h,c,i,l] att[b,h,i,l,j] v2[b,h,c,l,j], one value channel c at a time:
        # 2-3x faster on CPU than one three-operand einsum, which materialises (B, N, N, N, H, d_k) twice.
        out = torch.stack([torch.einsum("bhil,bhilj->bhij", v1[:, :, c], att * v2[:, :, c].unsqueeze(2))
                           for c in range(self.d_k)], -1)  # (B, H, i, j, d_k)  # fmt: skip
        return self.o(out.permute(0, 2, 3, 1, 4).reshape(b, n, n, d))


READOUT_SCALE = 16.0
"""Edge Transformer readout: the per-node sums over n pairs are divided by this constant (about our n)."""


class EdgeTransformer(nn.Module):
    """The Edge Transformer (3-WL aligned, no positional encoding).

    ``X_ij = Lin([h_i || h_j]) + edge_emb([ij in E]) + self_emb([i = j])``; each block does
    ``X <- LN(X + attn(X)); X <- LN(X + FFN(X))`` (FFN hidden ``2d``); the readout sums the first half of
    ``Lin(X_ij)`` over ``j`` and the second half over ``i`` per node (divided by :data:`READOUT_SCALE`),
    applies an MLP, then sums nodes and applies an MLP (the official Decomposer and Head).
    LayerNorm in place of the ZINC config's BatchNorm keeps padded pairs out of every statistic.
    """

    def __init__(self, *, dim: int = 16, layers: int = 2, heads: int = 4, out_dim: int = 1) -> None:
        super().__init__()
        dim, heads, layers = _check_pos("dim", dim), _check_pos("heads", heads), _check_pos("layers", layers)
        _check_pos("out_dim", out_dim)
        if dim % heads:
            raise ValueError(f"dim must be divisible by heads, got dim={dim}, heads={heads}")
        self.dim = dim
        self.node_embed = nn.Embedding(8, dim)
        self.pair_proj = nn.Linear(2 * dim, dim)
        self.edge_embed = nn.Embedding(2, dim)
        self.self_embed = nn.Embedding(2, dim)
        self.attn = nn.ModuleList(TriangularAttention(dim, heads) for _ in range(layers))
        self.norm1 = nn.ModuleList(nn.LayerNorm(dim) for _ in range(layers))
        self.norm2 = nn.ModuleList(nn.LayerNorm(dim) for _ in range(layers))
        self.ffn = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim)) for _ in range(layers)
        )
        self.out_proj = nn.Linear(dim, 2 * dim)
        self.node_mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, out_dim))

    def pair_states(self, data) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial pair states ``(B, N, N, d)`` and the node mask ``(B, N)``."""
        batch = _batch_vector(data)
        h, mask = to_dense_batch(self.node_embed(data.x.clamp(0, 7)), batch, batch_size=_num_graphs(data))
        n = h.size(1)
        adj = to_dense_adj(data.edge_index, batch, max_num_nodes=n, batch_size=_num_graphs(data)).long().clamp(0, 1)
        eye = torch.eye(n, dtype=torch.long, device=h.device).expand_as(adj)
        x = self.pair_proj(torch.cat([h.unsqueeze(2).expand(-1, -1, n, -1), h.unsqueeze(1).expand(-1, n, -1, -1)], -1))
        x = x + self.edge_embed(adj) + self.self_embed(eye)
        return x, mask

    def forward(self, data) -> torch.Tensor:
        x, mask = self.pair_states(data)
        pair_mask = (mask.unsqueeze(2) & mask.unsqueeze(1)).unsqueeze(-1).to(x.dtype)
        for attn, n1, n2, ffn in zip(self.attn, self.norm1, self.norm2, self.ffn):
            x = n1(x + attn(x, mask)) * pair_mask
            x = n2(x + ffn(x)) * pair_mask
        real = pair_mask.squeeze(-1).bool()
        y = x.new_zeros(*x.shape[:3], 2 * self.dim)
        y[real] = self.out_proj(x[real])
        # Sums over j (resp. i) divided by READOUT_SCALE: the official Decomposer normalises with BatchNorm,
        # whose batch statistics let a small model separate CSL classes only *within* a batch (at chance in
        # eval mode); a fixed scale keeps the sum (counts) and the O(n) magnitude in check.
        nodes = (y[..., : self.dim].sum(2) + y[..., self.dim :].sum(1)) / READOUT_SCALE  # B, N, d
        nodes = self.node_mlp(nodes[mask])
        return self.head(global_add_pool(nodes, _batch_vector(data), _num_graphs(data)))


class GIN(nn.Module):
    """GIN (Xu et al., 2019): ``h_v <- MLP((1 + eps) h_v + sum_{u in N(v)} h_u)``, sum readout of every
    layer's node states (jumping knowledge by sum). Bounded by 1-WL at any weights."""

    def __init__(self, *, dim: int = 32, layers: int = 4, out_dim: int = 1) -> None:
        super().__init__()
        dim, layers = _check_pos("dim", dim), _check_pos("layers", layers)
        _check_pos("out_dim", out_dim)
        self.node_embed = nn.Embedding(8, dim)
        self.convs = nn.ModuleList(
            GINConv(nn.Sequential(nn.Linear(dim, dim), nn.BatchNorm1d(dim), nn.ReLU(), nn.Linear(dim, dim)),
                    train_eps=True)
            for _ in range(layers)
        )  # fmt: skip
        self.heads = nn.ModuleList(nn.Linear(dim, out_dim) for _ in range(layers + 1))

    def forward(self, data) -> torch.Tensor:
        batch = _batch_vector(data)
        h = self.node_embed(data.x.clamp(0, 7))
        size = _num_graphs(data)
        out = self.heads[0](global_add_pool(h, batch, size))
        for conv, head in zip(self.convs, self.heads[1:]):
            h = F.relu(conv(h, data.edge_index))
            out = out + head(global_add_pool(h, batch, size))
        return out


MODEL_NAMES = {
    "gin": "GIN (1-WL)",
    "gt_none": "(2,1)-GT, no PE",
    "gt_lpe": "(2,1)-GT + LPE",
    "gt_spe": "(2,1)-GT + SPE",
    "gt3_lpe": "(3,1)-GT + LPE",
    "et": "Edge Transformer",
}
"""Names of the model variants used by the reproduction (keys of :func:`build_model`)."""


def build_model(name: str, *, out_dim: int, dim: int = 32, layers: int = 2, heads: int = 4, num_eigs: int = 16,
                et_dim: int = 16, gin_layers: int = 4) -> nn.Module:  # fmt: skip
    """One of the variants in :data:`MODEL_NAMES` with the miniature's sizes."""
    if name not in MODEL_NAMES:
        raise ValueError(f"name must be one of {sorted(MODEL_NAMES)}, got {name!r}")
    if name == "gin":
        return GIN(dim=dim, layers=gin_layers, out_dim=out_dim)
    if name == "et":
        return EdgeTransformer(dim=et_dim, layers=layers, heads=heads, out_dim=out_dim)
    order = 3 if name.startswith("gt3") else 2
    return TupleGT(order=order, pe=name.split("_")[1], dim=dim, layers=layers, heads=heads, num_eigs=num_eigs,
                   out_dim=out_dim)  # fmt: skip


def model_order(name: str) -> int:
    """The token order a variant needs from :func:`~icml24.graphs.wl_transformers.tokens.tokenize`."""
    return 3 if name.startswith("gt3") else 2

