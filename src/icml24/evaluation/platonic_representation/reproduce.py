"""Miniature reproduction of *The Platonic Representation Hypothesis* (Huh et al., ICML 2024,
arXiv:2405.07987), Sec. 3: cross-modal and cross-model alignment grows with competence.

The vision models are trained by objectives that never see the attributes the captions describe
(augmentation-invariance with InfoNCE, and denoising reconstruction); their competence is the held-out
accuracy of linear probes of the latent attributes. Models trained on the attributes (all five, or colour
only) are reported as controls, as are an untrained MiniLM and a hashed bag of words on the text side.
(The paragraph below describes the measurement; the objectives are in :func:`run_alignment`.)

One job per seed, in a simulated image-caption world (``world.py``): multitask MLP vision encoders of
several widths are trained on images to predict the latent attributes, and snapshots are taken along
training (rising competence). Each snapshot's hidden layers are compared, by the best-over-layer-pairs
mutual-kNN score, with the mean-pooled layers of a real pretrained sentence encoder (all-MiniLM-L6-v2,
bundled offline) on the paired captions. Controls: the same models at random initialisation, the caption
rows shuffled (chance), raw pixels, and the one-hot latent itself (an upper reference). Vision-vision
alignment is the mean score among the different widths at the same training stage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from icml24.common import decide
from icml24.common.experiment import (
    Analysis,
    Figure,
    Job,
    JobResult,
    Reproduction,
    Table,
    figure_png,
    fmt_mean_std,
    mean_std,
    new_figure,
    seeds_for,
)

SLUG = "platonic-representation"
MODULE = "icml24.evaluation.platonic_representation.reproduce"
DEFAULT_SEEDS = {"smoke": 1, "quick": 4, "full": 5}
ALPHA = 0.05
OBJECTIVES = {
    "ssl": "augmentation-invariance (InfoNCE)",
    "ae": "denoising reconstruction",
    "sup_all": "supervised on all 5 attributes (tied to the captions)",
    "sup_colour": "supervised on colour only (tied to the captions)",
}
"""Vision training objectives; only the first two are blind to the attributes the captions describe."""

_SCALES = {
    "smoke": {"n_eval": 128, "n_train": 512, "n_probe": 256, "widths": [8, 32], "checkpoints": [0, 40],
              "control_steps": 40, "k": 5, "text_encoder": "hashed_bow"},
    "quick": {"n_eval": 512, "n_train": 4000, "n_probe": 2000, "widths": [32, 128], "checkpoints": [0, 50, 200, 600],
              "control_steps": 600, "k": 10, "text_encoder": "minilm"},
    "full": {"n_eval": 1024, "n_train": 8000, "n_probe": 4000, "widths": [32, 128, 512],
             "checkpoints": [0, 30, 100, 300, 1000, 2000], "control_steps": 2000, "k": 10, "text_encoder": "minilm"},
}  # fmt: skip


def _spearman(x: Sequence[float], y: Sequence[float]) -> float:
    from scipy.stats import spearmanr

    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(spearmanr(x, y).statistic)


def _train_steps(net, extra, objective: str, x_tr, y_tr, steps: int, batch: int, gen, opt) -> None:
    """``steps`` Adam steps of ``objective`` on random batches."""
    import torch
    import torch.nn.functional as F

    from .encoders import augment_images, info_nce_loss

    for _ in range(steps):
        idx = torch.randint(0, len(x_tr), (batch,), generator=gen)
        x = x_tr[idx]
        if objective == "ssl":
            z1 = extra(net.features(augment_images(x, gen))[-1])
            z2 = extra(net.features(augment_images(x, gen))[-1])
            loss = info_nce_loss(z1, z2)
        elif objective == "ae":
            loss = F.mse_loss(torch.sigmoid(extra(net.features(augment_images(x, gen))[-1])), x.flatten(1))
        elif objective == "sup_all":
            loss = sum(F.cross_entropy(lo, y_tr[idx, j]) for j, lo in enumerate(net(x)))
        else:  # sup_colour
            loss = F.cross_entropy(net(x)[1], y_tr[idx, 1])
        opt.zero_grad()
        loss.backward()
        opt.step()


def run_alignment(config: dict, seed: int) -> dict:
    """Train vision MLPs by objectives blind to the captions (and two caption-tied controls), snapshot
    them, probe their competence on held-out scenes, and measure their alignment to several text sides."""
    import torch

    from .encoders import MultitaskMLP, hashed_bow_features, minilm_layer_features, ridge_probe_accuracy
    from .metrics import best_over_layers, chance_mutual_knn, knn_indices, knn_overlap
    from .world import ATTRIBUTES, make_world

    k = int(config["k"])
    train = make_world(int(config["n_train"]), seed=np.random.default_rng([seed, 1]))
    test = make_world(int(config["n_eval"]), seed=np.random.default_rng([seed, 2]))
    probe = make_world(int(config["n_probe"]), seed=np.random.default_rng([seed, 5]))
    texts: dict[str, list[np.ndarray]] = {"hashed_bow": hashed_bow_features(test.captions)}
    if config["text_encoder"] == "minilm":
        texts["minilm"] = minilm_layer_features(test.captions)
        texts["minilm_random"] = minilm_layer_features(test.captions, pretrained=False, init_seed=seed)
    main = config["text_encoder"]
    perm = np.random.default_rng([seed, 3]).permutation(len(test.captions))
    text_shuffled = [t[perm] for t in texts[main]]
    text_knn = {name: [knn_indices(t, k) for t in layers] for name, layers in texts.items()}
    x_tr, y_tr = torch.from_numpy(train.images), torch.from_numpy(train.attributes)
    x_te, x_pr = torch.from_numpy(test.images), torch.from_numpy(probe.images)
    heads = list(ATTRIBUTES.values())
    batch = int(config["batch_size"])

    onehot = np.concatenate([np.eye(c)[test.attributes[:, i]] for i, c in enumerate(heads)], 1)
    # Tiny jitter: one-hot rows tie exactly, and the tie order would otherwise decide the neighbours.
    onehot = onehot + np.random.default_rng([seed, 4]).normal(scale=1e-3, size=onehot.shape)
    out: dict = {
        "k": k,
        "n": len(test.captions),
        "chance": chance_mutual_knn(len(test.captions), k),
        "text_layers": len(texts[main]),
        "align_pixels": best_over_layers([test.images.reshape(len(test.images), -1)], texts[main], k=k).score,
        "align_latent": best_over_layers([onehot], texts[main], k=k).score,
        "latent_by_text": {name: best_over_layers([onehot], t, k=k).score for name, t in texts.items()},
    }

    def measure(net, tag: dict, jitter_key: list[int]) -> tuple[dict, list[np.ndarray]]:
        with torch.no_grad():
            feats = [f.double().numpy() for f in net.features(x_te)]
            pfeats = net.features(x_pr)[-1].double().numpy()
        # A dead (all-zero) unit layer breaks cosine similarity: add a tiny jitter.
        feats = [f + np.random.default_rng(jitter_key + [li]).normal(scale=1e-9, size=f.shape) for li, f in enumerate(feats)]
        acc = ridge_probe_accuracy(pfeats, probe.attributes, feats[-1], test.attributes)
        vk = [knn_indices(f, k) for f in feats]
        by_text = {}
        for name, tk in text_knn.items():
            sc = np.array([[float(knn_overlap(a, b).double().mean() / k) for b in tk] for a in vk])
            by_text[name] = sc
        m = dict(tag)
        m |= {"competence": float(acc.mean()), "probe": [float(a) for a in acc],
              "align": float(by_text[main].max()), "align_last_layer": float(by_text[main][-1, -1]),
              "align_shuffled": best_over_layers(feats, text_shuffled, k=k).score,
              "align_by_text": {name: float(sc.max()) for name, sc in by_text.items()},
              "align_by_text_layer": {name: [float(v) for v in sc.max(0)] for name, sc in by_text.items()}}  # fmt: skip
        return m, feats

    models: list[dict] = []
    # InfoNCE (decisive) and the colour-only control are snapshotted along training: the control runs the same
    # competence rules (a model that knows one caption-tied attribute shows how much alignment the data builds in).
    snapshotted = ("ssl", "sup_colour")
    snaps: dict[str, dict[int, list[list[np.ndarray]]]] = {o: {} for o in snapshotted}
    finals: dict[str, list[list[np.ndarray]]] = {}
    checkpoints = sorted(int(c) for c in config["checkpoints"])
    for wi, width in enumerate(config["widths"]):
        for oi, objective in enumerate(OBJECTIVES):
            torch.manual_seed(seed * 1000 + wi)  # the same initialisation for every objective of a width
            net = MultitaskMLP(in_features=x_tr[0].numel(), width=int(width), depth=int(config["depth"]), n_classes=heads)
            extra = None
            if objective == "ssl":
                extra = torch.nn.Linear(int(width), 64)
            elif objective == "ae":
                extra = torch.nn.Linear(int(width), x_tr[0].numel())
            params = list(net.parameters()) + (list(extra.parameters()) if extra is not None else [])
            opt = torch.optim.Adam(params, lr=float(config["lr"]))
            gen = torch.Generator().manual_seed(seed * 1000 + wi * 10 + oi)
            stops = checkpoints if objective in snapshotted else [int(config["control_steps"])]
            step = 0
            for c in stops:
                _train_steps(net, extra, objective, x_tr, y_tr, c - step, batch, gen, opt)
                step = c
                m, feats = measure(net, {"objective": objective, "width": int(width), "steps": c}, [seed, wi, oi, c])
                models.append(m)
                if objective in snapshotted:
                    snaps[objective].setdefault(c, []).append(feats)
            finals.setdefault(objective, []).append(feats)
    out["models"] = models

    def vision_vision(objective: str) -> list[dict]:
        vv = []
        for c in checkpoints:
            feats = snaps[objective][c]
            pair = [best_over_layers(feats[i], feats[j], k=k).score for i in range(len(feats)) for j in range(i + 1, len(feats))]
            comp = float(np.mean([m["competence"] for m in models if m["objective"] == objective and m["steps"] == c]))
            vv.append({"steps": c, "vision_vision": float(np.mean(pair)) if pair else math.nan, "competence": comp})
        return vv

    vv = vision_vision("ssl")
    out["vision_vision"] = vv
    vv_colour = vision_vision("sup_colour")
    out["vision_vision_colour"] = vv_colour
    # Cross-objective vision-vision alignment of the final models (same width, different objectives).
    out["cross_objective"] = {
        f"{a}|{b}": float(np.mean([best_over_layers(fa, fb, k=k).score for fa, fb in zip(finals[a], finals[b], strict=True)]))
        for i, a in enumerate(OBJECTIVES) for b in list(OBJECTIVES)[i + 1:]
    }  # fmt: skip
    ssl = [m for m in models if m["objective"] == "ssl"]
    out["spearman_competence_align"] = _spearman([m["competence"] for m in ssl], [m["align"] for m in ssl])
    out["best_trained_align"] = max((m["align"] for m in ssl if m["steps"] > 0), default=math.nan)
    out["best_random_align"] = max(m["align"] for m in ssl if m["steps"] == 0)
    out["best_shuffled_align"] = max(m["align_shuffled"] for m in ssl)
    out["spearman_competence_vv"] = _spearman([v["competence"] for v in vv], [v["vision_vision"] for v in vv])
    col = [m for m in models if m["objective"] == "sup_colour"]
    out["colour_spearman_competence_align"] = _spearman([m["competence"] for m in col], [m["align"] for m in col])
    out["colour_best_trained_align"] = max((m["align"] for m in col if m["steps"] > 0), default=math.nan)
    out["colour_best_random_align"] = max(m["align"] for m in col if m["steps"] == 0)
    out["colour_spearman_competence_vv"] = _spearman([v["competence"] for v in vv_colour],
                                                     [v["vision_vision"] for v in vv_colour])
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    s = dict(_SCALES[scale])
    s.update({"lr": 1e-3, "batch_size": 128, "depth": 2})
    return [Job(SLUG, "alignment", f"{MODULE}:run_alignment", s, seed) for seed in seeds_for(scale, seeds, DEFAULT_SEEDS)]


def _col(results: Sequence[JobResult], key: str) -> list[float]:
    return [float(r.metrics[key]) for r in results if key in r.metrics and r.metrics[key] is not None]


def competence_trend_decision(rhos: Sequence[float]) -> decide.Decision:
    """Rule (1): the per-seed Spearman correlations between probe competence and alignment over the
    snapshots of the caption-blind (InfoNCE) models have mean > 0 (one-sided one-sample t-test over seeds
    at ALPHA); not_supported if the mean is shown < 0."""
    return decide.compare_to_value(list(rhos), 0.0, alternative="greater", alpha=ALPHA,
                                   effect_name="mean over seeds of Spearman(competence, alignment)")  # fmt: skip


BEYOND_EQ = 0.01
"""A difference in alignment (mutual kNN) within +-0.01 between the caption-blind and the colour-only model is
evidence of no alignment beyond what the data builds in (not_supported by TOST)."""
BEYOND_EFFECT = 0.02
"""The alignment gain over the colour-only model the power statement of rule (4) assumes (about a quarter of the
InfoNCE model's gain over its random initialisation at quick scale, +0.05)."""


def beyond_colour_decision(caption_blind: Sequence[float], colour_only: Sequence[float]) -> decide.Decision:
    """Rule (4): paired over seeds, the final caption-blind (InfoNCE) model's alignment minus the colour-only
    supervised model's > 0 (one-sided paired t-test at ALPHA); not_supported if shown below 0 or within
    +-BEYOND_EQ (TOST). Captions in this world are a function of visible attributes, so the colour-only model's
    alignment is what the data builds in; competence must buy alignment beyond it."""
    return decide.compare(list(caption_blind), list(colour_only), paired=True, alternative="greater", alpha=ALPHA,
                          equivalence_margin=BEYOND_EQ,
                          effect_name="alignment, caption-blind (InfoNCE) - colour-only supervised")  # fmt: skip


POWER_RHO = 0.7
"""Snapshot-level correlation for the power statement: a strong monotone trend, as the paper's Fig. 3
shows across model families (our quick snapshots show 0.8-0.9); the README also gives the power at 0.5."""


def simulate_snapshot_rhos(rng: np.random.Generator, n_seeds: int, n_snapshots: int = 8, rho: float = POWER_RHO) -> list[float]:
    """Per-seed Spearman correlations of ``n_snapshots`` (competence, alignment) pairs drawn from a
    bivariate normal with correlation ``rho``."""
    cov = np.array([[1.0, rho], [rho, 1.0]])
    out = []
    for _ in range(n_seeds):
        xy = rng.multivariate_normal([0.0, 0.0], cov, size=n_snapshots)
        out.append(_spearman(xy[:, 0], xy[:, 1]))
    return out


@lru_cache(maxsize=16)
def competence_trend_power(n_seeds: int, n_snapshots: int) -> float:
    if n_seeds < 2 or n_snapshots < 3:
        return 0.0
    return decide.power(competence_trend_decision, lambda rng: simulate_snapshot_rhos(rng, n_seeds, n_snapshots),
                        n_sims=500, seed=0).supported  # fmt: skip


TEXT_NAMES = {"minilm": "MiniLM-L6 (pretrained)", "minilm_random": "MiniLM-L6 (random init)", "hashed_bow": "hashed bag of words"}
OBJ_NAMES = {"ssl": "InfoNCE", "ae": "denoising AE", "sup_all": "supervised, all attributes", "sup_colour": "supervised, colour only"}


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    rs = [r for r in results if r.status == "ok" and r.job.experiment == "alignment" and "models" in r.metrics]
    if not rs:
        return Analysis("inconclusive", f"[{scale}] no successful alignment job", [], [], [],
                        rule="no alignment job to decide on")  # fmt: skip
    enc = rs[0].job.config.get("text_encoder", "?")
    chance = mean_std(_col(rs, "chance"))[0]
    keys = sorted({(m.get("objective", "ssl"), m["width"], m["steps"]) for r in rs for m in r.metrics["models"]},
                  key=lambda t: (list(OBJECTIVES).index(t[0]) if t[0] in OBJECTIVES else 9, t[1], t[2]))  # fmt: skip
    rows = []
    for o, w, s in keys:
        ms = [m for r in rs for m in r.metrics["models"] if m.get("objective", "ssl") == o and m["width"] == w and m["steps"] == s]
        rows.append([OBJ_NAMES.get(o, o), w, s]
                    + [fmt_mean_std([m[c] for m in ms]) for c in ("competence", "align", "align_last_layer", "align_shuffled")])  # fmt: skip
    tables = [
        Table(
            f"Vision-language mutual kNN (k={rs[0].metrics['k']}, n={rs[0].metrics['n']}, text = {TEXT_NAMES.get(enc, enc)})",
            ["vision objective", "width", "train steps", "probe accuracy (held out)", "best-layer align", "last-layer align",
             "shuffled-caption control"],
            rows,
            note=f"Chance k/(n-1) = {chance:.4f}. Probe accuracy: mean over the 5 attributes of a ridge linear probe "
            f"fitted on separate scenes. Raw pixels: {fmt_mean_std(_col(rs, 'align_pixels'))}; one-hot latent Z "
            f"(reference): {fmt_mean_std(_col(rs, 'align_latent'))}. Mean ± std over {len(rs)} seeds.",
        )
    ]  # fmt: skip
    # Text-side controls: the final model of each objective (widest) against every text side.
    texts = [t for t in TEXT_NAMES if any(t in m.get("align_by_text", {}) for r in rs for m in r.metrics["models"])]
    trow = []
    last_steps = {o: max(s for (oo, _, s) in keys if oo == o) for o in {k[0] for k in keys}}
    widest = max(k[1] for k in keys)
    for o in [o for o in OBJECTIVES if o in last_steps] + ["random init"]:
        if o == "random init":
            ms = [m for r in rs for m in r.metrics["models"] if m.get("objective", "ssl") == "ssl" and m["steps"] == 0 and m["width"] == widest]
        else:
            ms = [m for r in rs for m in r.metrics["models"] if m.get("objective", "ssl") == o and m["steps"] == last_steps[o] and m["width"] == widest]
        trow.append([OBJ_NAMES.get(o, o)] + [fmt_mean_std([m["align_by_text"][t] for m in ms if "align_by_text" in m]) for t in texts])
    lat = [fmt_mean_std([r.metrics.get("latent_by_text", {}).get(t, math.nan) for r in rs]) for t in texts]
    trow.append(["one-hot latent Z (reference)"] + lat)
    tables.append(Table(f"Text-side controls: best-layer mutual kNN of the width-{widest} models at their last snapshot",
                        ["vision model"] + [TEXT_NAMES[t] for t in texts], trow,
                        note="The small causal LMs of the language issue do not exist in the library yet, so the "
                        "language-competence axis is only MiniLM (pretrained vs random init) and a bag of words. "
                        "Mean ± std over seeds."))  # fmt: skip
    if "minilm" in texts:
        lrows = []
        for o in [o for o in OBJECTIVES if o in last_steps]:
            ms = [m for r in rs for m in r.metrics["models"] if m.get("objective", "ssl") == o and m["steps"] == last_steps[o] and m["width"] == widest]
            per = np.array([m["align_by_text_layer"]["minilm"] for m in ms])
            lrows.append([OBJ_NAMES[o]] + [fmt_mean_std(per[:, j].tolist()) for j in range(per.shape[1])])
        tables.append(Table("Alignment to each MiniLM layer (0 = token embeddings), best vision layer",
                            ["vision model"] + [f"layer {j}" for j in range(len(lrows[0]) - 1)], lrows,
                            note="Mean ± std over seeds."))  # fmt: skip
    steps = sorted({v["steps"] for r in rs for v in r.metrics["vision_vision"]})
    vv_rows = []
    for s in steps:
        vs = [v for r in rs for v in r.metrics["vision_vision"] if v["steps"] == s]
        vc = [v for r in rs for v in r.metrics.get("vision_vision_colour", []) if v["steps"] == s]
        vv_rows.append([s, fmt_mean_std([v["competence"] for v in vs]), fmt_mean_std([v["vision_vision"] for v in vs]),
                        fmt_mean_std([v["competence"] for v in vc]), fmt_mean_std([v["vision_vision"] for v in vc])])  # fmt: skip
    tables.append(Table("Vision-vision alignment among the models of different widths at the same stage",
                        ["train steps", "InfoNCE: mean probe accuracy", "InfoNCE: mean pairwise mutual kNN",
                         "colour only (control): mean probe accuracy", "colour only: mean pairwise mutual kNN"], vv_rows,
                        note="Mean ± std over seeds."))  # fmt: skip
    cross = sorted({key for r in rs for key in r.metrics.get("cross_objective", {})})
    if cross:
        tables.append(Table("Vision-vision alignment across objectives (final models, same width)",
                            ["objective pair", "mean mutual kNN"],
                            [[" vs ".join(OBJ_NAMES[x] for x in key.split("|")),
                              fmt_mean_std([r.metrics["cross_objective"][key] for r in rs if key in r.metrics.get("cross_objective", {})])]
                             for key in cross]))  # fmt: skip

    checks = []
    # The colour-only supervised model is the negative control of every decisive rule: captions here are written
    # from visible attributes, so a model that knows colour alone gains alignment by construction. A rule that it
    # passes too cannot tell convergence from alignment built into the data (issue 42).
    has_colour = all("colour_spearman_competence_align" in r.metrics for r in rs)
    ctrl_claim = ("the same rule on the colour-only supervised model (caption-tied, knows one attribute): alignment "
                  "it gains too is built into the data")  # fmt: skip
    rho = _col(rs, "spearman_competence_align")
    n_snap = len([m for m in rs[0].metrics["models"] if m.get("objective", "ssl") == "ssl"])
    d1 = competence_trend_decision(rho)
    c1 = competence_trend_decision(_col(rs, "colour_spearman_competence_align")) if has_colour else None
    checks.append(d1.to_check(id="align-rises-with-competence", power=competence_trend_power(len(rho), n_snap),
                              claim="(1) Vision-language alignment rises with the competence of caption-blind vision models",
                              evidence="per-seed Spearman over the InfoNCE snapshots " + ", ".join(f"{v:.2f}" for v in rho),
                              control=c1, control_claim=ctrl_claim))  # fmt: skip
    bt, br, bs = _col(rs, "best_trained_align"), _col(rs, "best_random_align"), _col(rs, "best_shuffled_align")
    d2 = decide.compare(bt, br, paired=True, alternative="greater", alpha=ALPHA,
                        effect_name="best trained - best random-init alignment (InfoNCE)")  # fmt: skip
    c2 = (decide.compare(_col(rs, "colour_best_trained_align"), _col(rs, "colour_best_random_align"), paired=True,
                         alternative="greater", alpha=ALPHA,
                         effect_name="best trained - best random-init alignment (colour only)") if has_colour else None)  # fmt: skip
    checks.append(d2.to_check(id="trained-above-random-init",
                              claim="(2) Trained caption-blind models align with language above the same models at random init",
                              evidence=f"shuffled captions {fmt_mean_std(bs)}, chance {chance:.4f}",
                              control=c2, control_claim=ctrl_claim))  # fmt: skip
    rv = _col(rs, "spearman_competence_vv")
    d3 = decide.compare_to_value(rv, 0.0, alternative="greater", alpha=ALPHA,
                                 effect_name="mean over seeds of Spearman(stage competence, vision-vision alignment)")  # fmt: skip
    c3 = (decide.compare_to_value(_col(rs, "colour_spearman_competence_vv"), 0.0, alternative="greater", alpha=ALPHA,
                                  effect_name="mean Spearman(stage competence, vision-vision), colour only")
          if has_colour else None)  # fmt: skip
    checks.append(d3.to_check(id="vision-vision-rises",
                              claim="(3) Vision models of rising competence are more aligned with each other",
                              control=c3, control_claim=ctrl_claim))  # fmt: skip
    if not has_colour:
        checks.append(decide.not_run_check(
            "colour-only-control", "(control) the decisive rules run on the colour-only model's snapshots",
            "these rows predate the colour-only snapshots (issue 42): the decisive rules have no negative control"))  # fmt: skip

    def final_of(o: str, key: str, text: str | None = None) -> list[float]:
        """Per seed, ``key`` of objective ``o``'s widest model at its last snapshot (``align_by_text[text]``
        when ``text`` is given): one value per seed, the independent unit."""
        vals = []
        for r in rs:
            ms = [m for m in r.metrics["models"] if m.get("objective") == o and m["steps"] == last_steps.get(o) and m["width"] == widest]
            vals += [(m["align_by_text"].get(text, math.nan) if text else m[key]) for m in ms if text is None or "align_by_text" in m]
        return vals

    if "sup_colour" in last_steps:
        a_ssl, a_col = final_of("ssl", "align", enc), final_of("sup_colour", "align", enc)
        d4 = beyond_colour_decision(a_ssl, a_col)
        c4 = beyond_colour_decision(final_of("ssl", "align_shuffled"), final_of("sup_colour", "align_shuffled"))
        comp_gap = np.array(final_of("ssl", "competence")) - np.array(final_of("sup_colour", "competence"))
        diffs = np.array(a_ssl) - np.array(a_col)
        pw = (decide.power_of_compare(BEYOND_EFFECT, max(float(np.std(diffs, ddof=1)), 1e-4), len(diffs), paired=True,
                                      alternative="greater", equivalence_margin=BEYOND_EQ, alpha=ALPHA,
                                      n_sims=400).supported if len(diffs) >= 2 else None)  # fmt: skip
        checks.append(d4.to_check(
            id="align-beyond-colour-only", power=pw,
            claim="(4) The caption-blind model, more competent than a colour-only one, aligns with language beyond "
                  "what the colour-only model gets (alignment rises with competence beyond what the data builds in)",
            evidence=f"width {widest}, last snapshot: alignment InfoNCE {fmt_mean_std(a_ssl)}, colour only "
                     f"{fmt_mean_std(a_col)}; probe competence InfoNCE - colour only {fmt_mean_std(comp_gap.tolist())}",
            control=c4, control_claim="the same rule against shuffled captions (no alignment to find)"))  # fmt: skip
    else:
        checks.append(decide.not_run_check("align-beyond-colour-only", "(4) alignment beyond the colour-only model",
                                           "no colour-only supervised model in these rows"))  # fmt: skip

    # Reported controls (not decisive): is the alignment specific to the caption-blind competence?
    def final_align(o: str, text: str = "minilm") -> list[float]:
        return final_of(o, "align", text)

    if "sup_colour" in last_steps and enc == "minilm":
        db = decide.compare(final_align("ssl", "minilm"), final_align("ssl", "hashed_bow"), paired=True, alternative="greater",
                            alpha=ALPHA, equivalence_margin=0.01, effect_name="alignment to MiniLM - to a bag of words (InfoNCE)")  # fmt: skip
        checks.append(db.to_check(id="control-bag-of-words", decisive=False,
                                  claim="(control) a pretrained language model aligns better than an untrained bag of words"))  # fmt: skip
        dr = decide.compare(final_align("ssl", "minilm"), final_align("ssl", "minilm_random"), paired=True, alternative="greater",
                            alpha=ALPHA, equivalence_margin=0.01, effect_name="pretrained - random-init MiniLM alignment (InfoNCE)")  # fmt: skip
        checks.append(dr.to_check(id="control-untrained-minilm", decisive=False,
                                  claim="(control) pretrained MiniLM aligns better than the same architecture untrained"))  # fmt: skip
    summary = f"[{scale}, text={TEXT_NAMES.get(enc, enc)}, {len(rs)} seeds] " + " ".join(
        f"{c.claim}: {c.verdict} ({c.evidence})." for c in checks)
    a = decide.analysis(checks, summary=summary, rule="all", tables=tables, figures=[])
    if enc == "hashed_bow" and a.verdict == "supported":
        a.verdict = "inconclusive"
        a.rule += "; with the smoke scale's bag-of-words text side the verdict is at most inconclusive"
    if enc == "hashed_bow":
        a.summary += " The text side is a hashed bag of words (smoke scale), not a language model: no verdict can be 'supported'."
    fig, ax = new_figure(1, 2)
    for r in rs:
        ms = [m for m in r.metrics["models"] if m.get("objective", "ssl") == "ssl"]
        ax[0, 0].scatter([m["competence"] for m in ms], [m["align"] for m in ms], c="C0", s=18)
        ax[0, 0].scatter([m["competence"] for m in ms], [m["align_shuffled"] for m in ms], marker="x", c="grey", s=12)
        for o, col in (("ae", "C1"), ("sup_all", "C2"), ("sup_colour", "C3")):
            mo = [m for m in r.metrics["models"] if m.get("objective") == o]
            ax[0, 0].scatter([m["competence"] for m in mo], [m["align"] for m in mo], c=col, marker="s", s=18)
        vv = r.metrics["vision_vision"]
        ax[0, 1].plot([v["competence"] for v in vv], [v["vision_vision"] for v in vv], "o-", alpha=0.7)
    ax[0, 0].axhline(chance, ls="--", c="k", lw=0.8)
    ax[0, 0].set_xlabel("held-out linear-probe accuracy (competence)")
    ax[0, 0].set_ylabel("mutual kNN to text (best layers)")
    ax[0, 1].set_xlabel("mean probe accuracy at stage")
    ax[0, 1].set_ylabel("vision-vision mutual kNN (InfoNCE widths)")
    a.figures.append(Figure("Alignment vs competence", figure_png(fig), "Left: every snapshot of every seed (one point per "
                     "model and seed; blue = InfoNCE, orange = denoising AE, green = supervised all, red = colour only; crosses = "
                     "shuffled captions; dashed = chance). Right: vision-vision alignment, one line per seed."))  # fmt: skip
    return a


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "As vision models become more competent, the similarity structure of their representations converges "
        "towards that of language models on paired data, and towards that of other competent vision models."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Simulated world: images are rendered and captions written from a known latent (shape, colour, size, quadrant, "
        "count) by templates with paraphrases and dropped attributes; the paper uses WIT image-caption pairs and Places-365.",
        "Vision models are small MLPs trained here by objectives blind to the captions (augmentation-invariance with "
        "InfoNCE, the decisive arm; denoising reconstruction), snapshotted along training, with competence measured by "
        "held-out linear probes of the latent attributes; models trained on the attributes themselves are controls only. "
        "The paper uses 78 pretrained ViTs and VTAB competence.",
        "One real language model (all-MiniLM-L6-v2, 22M parameters, frozen, offline) plus two controls (the same "
        "architecture untrained, a hashed bag of words) instead of the BLOOM/OpenLLaMA/LLaMA families; the small causal "
        "LMs of the language issue do not exist in the library yet, so the paper's language-scale axis is not "
        "reproduced. The smoke scale uses the bag of words and cannot return 'supported'.",
        "No outlier clipping before the metric (the official pipeline clips at q=0.95); n = 512 (quick) or 1024 (full), k = 10.",
        "Captions here are a function of visible attributes, so a colour-only supervised model is the negative control of "
        "every decisive rule (issue 42) and the caption-blind model must align beyond it; the paper has no such control.",
    ),
    scales=("smoke", "quick", "full"),
)
