"""Training, evaluation and the optimisation-based baseline for the toy E3-FaceNet (notes sections 3, 6).

* :func:`pretrain_semantic_encoders`: a mini-CLIP trained first on the procedural renders (text encoder + image
  encoder, contrastive loss and attribute heads), then frozen: it gives the generator its text embeddings and the
  contrastive loss ``L_clip`` its image tower, as CLIP does in the paper.
* :func:`train_attribute_classifier`: a separate attribute classifier (its own seed, cross-entropy only) that is
  the semantic metric (the "CLIP score" and the attribute accuracy of generated faces).
* :func:`train_e3facenet`: the GAN (section 3.5): two-logit discriminator with R1, generator loss
  ``adv + L_clip + w_reg L_reg + w_delta L_delta``, an exponential moving average of the generator.
* :func:`evaluate_generator`: attribute accuracy against the caption, cross-view agreement of predictions and of
  the frozen embedding over 5 yaws (the MVIC analogue), depth total variation, an embedding Frechet distance.
* :func:`optimise_style_codes`: the optimisation baseline (Latent3D/StyleCLIP-style): a text-free synthesis
  network ``w -> image`` and Adam steps on ``w`` per prompt, guided by the frozen image-text similarity.
* :func:`time_direct_generation`: wall time of E3-FaceNet's one-pass 5-view generation.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.nn import functional as F

from icml24.common.validation import integer, positive_int
from icml24.vision.e3_facenet.faces import (
    attribute_sizes,
    caption_faces,
    make_tokenizer,
    render_toy_faces,
    sample_attributes,
)
from icml24.vision.e3_facenet.geometry import (
    depth_total_variation,
    geometric_regularization,
    reprojection_error,
)
from icml24.vision.e3_facenet.losses import (
    contrastive_loss,
    discriminator_loss,
    generator_adversarial_loss,
    offset_penalty,
    r1_penalty,
)
from icml24.vision.e3_facenet.networks import (
    AttributeEncoder,
    E3FaceNetConfig,
    E3FaceNetGenerator,
    TextEncoder,
    TextFeatures,
    TwoLogitDiscriminator,
)

__all__ = [
    "StyleCodeOptimiser",
    "EVAL_YAWS",
    "GANConfig",
    "SemanticEncoders",
    "TrainedGenerator",
    "attribute_group_ids",
    "evaluate_generator",
    "optimise_style_codes",
    "pretrain_semantic_encoders",
    "time_direct_generation",
    "train_attribute_classifier",
    "train_e3facenet",
]

YAW_RANGE = 0.3
"""Training and evaluation yaws lie in ``[-0.3, 0.3]`` rad (the paper's camera ``range_u``)."""
EVAL_YAWS = (-0.3, -0.15, 0.0, 0.15, 0.3)
"""The five views of every evaluated face (the paper's five-view generation)."""


def _pos_float(name: str, value: object, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    return float(value)


def attribute_group_ids(attributes: torch.Tensor) -> torch.Tensor:
    """One integer per attribute vector (mixed radix): faces with equal ids have the same caption attributes."""
    ids = torch.zeros(len(attributes), dtype=torch.long)
    for col, size in enumerate(attribute_sizes()):
        ids = ids * size + attributes[:, col]
    return ids


def _batch(n: int, gen: torch.Generator, caption_seed: int) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    attrs = sample_attributes(n, generator=gen)
    yaw = (torch.rand(n, generator=gen) * 2 - 1) * YAW_RANGE
    return attrs, yaw, caption_faces(attrs, seed=caption_seed)


@dataclass
class SemanticEncoders:
    """The frozen mini-CLIP: ``text`` (:class:`TextEncoder`) and ``image`` (:class:`AttributeEncoder`), and the
    held-out accuracy of the image encoder's attribute heads."""

    text: TextEncoder
    image: AttributeEncoder
    accuracy: float = float("nan")


def _attribute_ce(logits: Sequence[torch.Tensor], attrs: torch.Tensor) -> torch.Tensor:
    return sum(F.cross_entropy(lg, attrs[:, i]) for i, lg in enumerate(logits)) / len(logits)


@torch.no_grad()
def _accuracy(encoder: AttributeEncoder, seed: int, n: int = 256) -> float:
    gen = torch.Generator().manual_seed(seed)
    attrs, yaw, _ = _batch(n, gen, seed)
    pred = encoder.predict(render_toy_faces(attrs, yaw)["image"])
    return float((pred == attrs).float().mean())


def pretrain_semantic_encoders(
    *, steps: int = 300, batch_size: int = 64, lr: float = 3e-3, temperature: float = 0.1, seed: int = 0
) -> SemanticEncoders:
    """Train the text and image encoders together on fresh renders (random yaw) and their captions: the
    contrastive loss (captions of one attribute set are all positives) plus the image heads' cross-entropy.
    Returns them frozen (``requires_grad=False``, eval mode)."""
    steps, batch_size = positive_int(steps, "steps"), integer(batch_size, "batch_size", low=2)
    lr, temperature = _pos_float("lr", lr), _pos_float("temperature", temperature)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        text = TextEncoder(tokenizer=make_tokenizer())
        image = AttributeEncoder(attribute_sizes=attribute_sizes())
    params = [p for p in [*text.parameters(), *image.parameters()] if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    gen = torch.Generator().manual_seed(seed + 1)
    for step in range(steps):
        attrs, yaw, caps = _batch(batch_size, gen, seed * 100_003 + step)
        emb, logits = image(render_toy_faces(attrs, yaw)["image"])
        t = text.encode(caps)
        loss = contrastive_loss(emb, t.global_, temperature=temperature, groups=attribute_group_ids(attrs))
        loss = loss + _attribute_ce(logits, attrs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    for m in (text, image):
        m.eval().requires_grad_(False)
    return SemanticEncoders(text, image, _accuracy(image, seed + 7))


def train_attribute_classifier(*, steps: int = 300, batch_size: int = 64, lr: float = 3e-3, seed: int = 0) -> AttributeEncoder:
    """An attribute classifier trained by cross-entropy on fresh renders (random yaw), frozen; the semantic metric
    (its ``accuracy_`` attribute holds its accuracy on 256 held-out renders)."""
    steps, batch_size = positive_int(steps, "steps"), integer(batch_size, "batch_size", low=2)
    lr = _pos_float("lr", lr)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        clf = AttributeEncoder(attribute_sizes=attribute_sizes())
    opt = torch.optim.Adam(clf.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed + 2)
    for step in range(steps):
        attrs, yaw, _ = _batch(batch_size, gen, step)
        _, logits = clf(render_toy_faces(attrs, yaw)["image"])
        loss = _attribute_ce(logits, attrs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    clf.eval().requires_grad_(False)
    clf.accuracy_ = _accuracy(clf, seed + 11)
    return clf


@dataclass(frozen=True)
class GANConfig:
    """Training of the toy E3-FaceNet (the paper's values in brackets)."""

    steps: int = 600
    """Generator/discriminator steps (fine-tuning from StyleNeRF for thousands of kimg)."""
    batch_size: int = 32
    """Images per step (64)."""
    lr: float = 2e-3
    """Adam learning rate of G and D (2.5e-4; larger here because training starts from scratch and is short)."""
    betas: tuple[float, float] = (0.0, 0.99)
    """Adam betas (StyleGAN2's)."""
    r1_gamma: float = 0.5
    """R1 weight gamma (0.5 in the code's 512 spec)."""
    r1_every: int = 4
    """Lazy R1: applied every this many steps, scaled by it (StyleGAN2's lazy regularisation)."""
    clip_weight: float = 1.0
    """Weight of the contrastive loss L_clip (1 in the code)."""
    reg_weight: float = 0.0
    """Weight of the geometric regularisation L_reg (0: off, the base; 1 in the code)."""
    normal_weight: float = 0.5
    """Weight of L_normal inside L_reg (0.5 in the code)."""
    offset_weight: float = 1.0
    """Weight of the offset penalty L_delta = mean |dw| (1 in the code)."""
    nerf_path_weight: float = 1.0
    """Weight of StyleNeRF's NeRF-path regulariser, mean squared difference between the 2x average-pooled image
    and the NeRF's own low-resolution RGB (keeps the 2D upsampler from painting faces fixed to the screen)."""
    temperature: float = 0.1
    """Temperature of the contrastive loss (CLIP's learned logit scale 100, i.e. 0.01)."""
    ema_kimg: float = 0.5
    """Half-life of the generator's EMA in thousands of images (20 in the code)."""
    ema_rampup: float = 0.1
    """The EMA half-life is at most this fraction of the images seen so far (StyleGAN2-ADA's ramp-up 0.05)."""

    def __post_init__(self) -> None:
        integer(self.steps, "steps", low=0)
        integer(self.batch_size, "batch_size", low=2)
        positive_int(self.r1_every, "r1_every")
        _pos_float("lr", self.lr)
        for name in ("r1_gamma", "clip_weight", "reg_weight", "normal_weight", "offset_weight", "nerf_path_weight", "ema_kimg", "ema_rampup"):
            _pos_float(name, getattr(self, name), allow_zero=True)
        _pos_float("temperature", self.temperature)
        if not (isinstance(self.betas, tuple) and len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas)):
            raise ValueError(f"betas must be a pair of numbers in [0, 1), got {self.betas!r}")


@dataclass
class TrainedGenerator:
    """A trained generator: ``generator`` (raw), ``ema`` (the moving average, used for evaluation), the
    discriminator, the frozen encoders, and loss curves (``history``: per logged step, G loss, D loss, L_reg,
    mean ``|dw|``)."""

    generator: E3FaceNetGenerator
    ema: E3FaceNetGenerator
    discriminator: TwoLogitDiscriminator
    encoders: SemanticEncoders
    history: dict[str, list[float]] = field(default_factory=dict)
    train_seconds: float = 0.0

    @torch.no_grad()
    def generate(self, captions: Sequence[str], yaws: Sequence[float] = EVAL_YAWS, *, seed: int = 0) -> torch.Tensor:
        """Images ``(len(yaws), len(captions), 3, 16, 16)`` of the EMA generator: one noise per caption, every view."""
        text = self.encoders.text.encode(list(captions))
        z = torch.randn(len(captions), self.ema.config.z_dim, generator=torch.Generator().manual_seed(seed))
        return torch.stack([self.ema(z, torch.full((len(captions),), float(y)), text).image for y in yaws])


def _ema_update(ema: torch.nn.Module, model: torch.nn.Module, beta: float) -> None:
    with torch.no_grad():
        for pe, p in zip(ema.parameters(), model.parameters()):
            pe.lerp_(p, 1 - beta)
        for be, b in zip(ema.buffers(), model.buffers()):
            be.copy_(b)


def train_e3facenet(
    *,
    config: E3FaceNetConfig,
    train_config: GANConfig,
    encoders: SemanticEncoders,
    seed: int = 0,
    log_every: int = 25,
) -> TrainedGenerator:
    """Train a text-to-3D-aware face GAN on fresh renders (section 3.5).

    D step: ``discriminator_loss`` on real (render, caption) pairs and generated images, plus lazy R1 on the reals.
    G step: ``0.5 [softplus(-s_gen) + softplus(-s_match)] + clip_weight L_clip + reg_weight (L_loc + 0.5 L_normal)
    + offset_weight mean|dw|``; an EMA copy of G after every step. ``config.text_dim == 0`` trains an unconditional
    GAN (realism logit only, no L_clip). Deterministic given ``seed`` (one torch thread).
    """
    if not isinstance(config, E3FaceNetConfig):
        raise TypeError(f"config must be an E3FaceNetConfig, got {type(config).__name__}")
    if not isinstance(train_config, GANConfig):
        raise TypeError(f"train_config must be a GANConfig, got {type(train_config).__name__}")
    if not isinstance(encoders, SemanticEncoders):
        raise TypeError(f"encoders must be SemanticEncoders, got {type(encoders).__name__}")
    if config.text_dim not in (0, encoders.text.dim):
        raise ValueError(f"config.text_dim must be 0 or the text encoder's width {encoders.text.dim}, got {config.text_dim}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    log_every = positive_int(log_every, "log_every")
    tc = train_config
    cond = config.text_dim > 0
    with torch.random.fork_rng():
        # G's shared modules are built before the enhancers, and D from its own seed, so that variants with and
        # without SCE (or L_reg) start from the same weights and see the same batches (paired by seed).
        torch.manual_seed(seed)
        G = E3FaceNetGenerator(config=config)
        torch.manual_seed(seed + 500_009)
        D = TwoLogitDiscriminator(text_dim=config.text_dim)
    ema = copy.deepcopy(G).eval().requires_grad_(False)
    opt_g = torch.optim.Adam(G.parameters(), lr=tc.lr, betas=tc.betas)
    opt_d = torch.optim.Adam(D.parameters(), lr=tc.lr, betas=tc.betas)
    gen = torch.Generator().manual_seed(seed * 7919 + 3)
    hist: dict[str, list[float]] = {"step": [], "g_loss": [], "d_loss": [], "reg": [], "offset": [], "clip": [],
                                    "nerf_path": []}  # fmt: skip
    acc = {k: 0.0 for k in ("g_loss", "d_loss", "reg", "offset", "clip", "nerf_path")}
    n_acc = 0
    start = time.perf_counter()

    def encode(caps: list[str]) -> TextFeatures | None:
        with torch.no_grad():
            return encoders.text.encode(caps) if cond else None

    def glob(t: TextFeatures | None) -> torch.Tensor | None:
        return t.global_ if t is not None else None

    for step in range(tc.steps):
        b = tc.batch_size
        # ---- discriminator
        attrs, yaw, caps = _batch(b, gen, seed * 1_000_003 + 2 * step)
        real = render_toy_faces(attrs, yaw)["image"]
        t_real = encode(caps)
        f_attrs, f_yaw, f_caps = _batch(b, gen, seed * 1_000_003 + 2 * step + 1)
        t_fake = encode(f_caps)
        z = torch.randn(b, config.z_dim, generator=gen)
        with torch.no_grad():
            fake = G(z, f_yaw, t_fake).image
        do_r1 = tc.r1_gamma > 0 and step % tc.r1_every == 0
        real.requires_grad_(do_r1)
        rr, rm = D(real, glob(t_real))
        fr, fm = D(fake, glob(t_fake))
        d_loss = discriminator_loss(rr, fr, rm, fm)
        if do_r1:
            d_loss = d_loss + tc.r1_every * r1_penalty(rr + (rm if rm is not None else 0), real, gamma=tc.r1_gamma)
        opt_d.zero_grad(set_to_none=True)
        d_loss.backward()
        opt_d.step()
        # ---- generator
        g_attrs, g_yaw, g_caps = _batch(b, gen, seed * 1_000_003 + 2 * step + 7)
        t_g = encode(g_caps)
        z = torch.randn(b, config.z_dim, generator=gen)
        out = G(z, g_yaw, t_g)
        D.requires_grad_(False)
        gr, gm = D(out.image, glob(t_g))
        D.requires_grad_(True)
        g_loss = generator_adversarial_loss(gr, gm)
        clip = torch.zeros(())
        if cond and tc.clip_weight > 0:
            emb, _ = encoders.image(out.image)
            clip = contrastive_loss(emb, t_g.global_, temperature=tc.temperature, groups=attribute_group_ids(g_attrs))
            g_loss = g_loss + tc.clip_weight * clip
        reg = geometric_regularization(out.points, normal_weight=tc.normal_weight)["reg"]
        if tc.reg_weight > 0:
            g_loss = g_loss + tc.reg_weight * reg
        off = offset_penalty(out.offsets)
        if out.offsets and tc.offset_weight > 0:
            g_loss = g_loss + tc.offset_weight * off
        path = torch.zeros(())
        if tc.nerf_path_weight > 0:
            path = (F.avg_pool2d(out.image, 2) - out.nerf_rgb).square().mean()
            g_loss = g_loss + tc.nerf_path_weight * path
        opt_g.zero_grad(set_to_none=True)
        g_loss.backward()
        opt_g.step()
        # ---- EMA of G
        seen = (step + 1) * b
        half = min(tc.ema_kimg * 1000, seen * tc.ema_rampup) if tc.ema_rampup > 0 else tc.ema_kimg * 1000
        _ema_update(ema, G, 0.5 ** (b / max(half, 1e-8)) if half > 0 else 0.0)
        for k, v in (("g_loss", g_loss), ("d_loss", d_loss), ("reg", reg), ("offset", off), ("clip", clip),
                     ("nerf_path", path)):
            acc[k] += float(v.detach())
        n_acc += 1
        if (step + 1) % log_every == 0 or step + 1 == tc.steps:
            hist["step"].append(step + 1)
            for k in acc:
                hist[k].append(acc[k] / n_acc)
                acc[k] = 0.0
            n_acc = 0
    return TrainedGenerator(G, ema, D, encoders, hist, time.perf_counter() - start)


def _frechet(a: np.ndarray, b: np.ndarray) -> float:
    """Frechet distance between Gaussians fitted to two sets of embeddings (the FID formula)."""
    from scipy import linalg

    mu1, mu2 = a.mean(0), b.mean(0)
    s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = linalg.sqrtm(s1 @ s2)
    covmean = np.real(covmean)
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1 + s2 - 2 * covmean))


@torch.no_grad()
def evaluate_generator(
    generator: E3FaceNetGenerator,
    text_encoder: TextEncoder,
    judge: AttributeEncoder,
    *,
    prompts: int = 64,
    seed: int = 0,
    yaws: Sequence[float] = EVAL_YAWS,
) -> dict[str, float]:
    """Generate ``prompts`` random captions (one noise each) at every yaw and measure, with the frozen ``judge``:

    * ``attribute_accuracy``: fraction of (prompt, view, attribute) where the judge reads the caption's value;
    * ``view_agreement``: fraction of (prompt, attribute, view pair) with equal predictions;
    * ``view_embedding_similarity``: mean cosine of the judge's embeddings over view pairs (the MVIC analogue);
    * ``reprojection_error``: mean colour difference between the frontal view and each other view after warping
      through the generated depth (:func:`~icml24.vision.e3_facenet.geometry.reprojection_error` on the face's
      pixels, opacity > 0.5, that the other view's own depth shows as visible; lower: the views agree with one 3D
      surface); ``static_reprojection_error`` is the
      same with the frontal image in place of every view (what a generator that ignores the camera would score);
    * ``depth_tv``: mean total variation of the expected-depth maps (lower: smoother geometry);
    * ``embedding_fd``: Frechet distance of the judge's embeddings of the generated images to those of renders
      of the same captions and yaws (an FID analogue; lower: closer to the data);
    * the same accuracy / agreement / similarity of the renders themselves (``real_*``, the ceiling).
    """
    if not isinstance(generator, E3FaceNetGenerator):
        raise TypeError(f"generator must be an E3FaceNetGenerator, got {type(generator).__name__}")
    if not isinstance(text_encoder, TextEncoder):
        raise TypeError(f"text_encoder must be a TextEncoder, got {type(text_encoder).__name__}")
    if not isinstance(judge, AttributeEncoder):
        raise TypeError(f"judge must be an AttributeEncoder, got {type(judge).__name__}")
    prompts = integer(prompts, "prompts", low=2)
    if isinstance(yaws, (str, bytes)) or not isinstance(yaws, Sequence) or len(yaws) < 2:
        raise ValueError("yaws must be a sequence of at least two angles")
    was_training = generator.training
    generator.eval()
    gen = torch.Generator().manual_seed(seed + 12345)
    attrs = sample_attributes(prompts, generator=gen)
    caps = caption_faces(attrs, seed=seed + 5)
    text = text_encoder.encode(caps)
    z = torch.randn(prompts, generator.config.z_dim, generator=gen)
    outs = [generator(z, torch.full((prompts,), float(y)), text) for y in yaws]
    generator.train(was_training)
    images = torch.stack([o.image for o in outs])  # (V, P, 3, H, W)
    depth = torch.stack([o.depth for o in outs])
    renders = [render_toy_faces(attrs, torch.full((prompts,), float(y))) for y in yaws]
    real = torch.stack([x["image"] for x in renders])
    res = images.shape[-1]
    front = int(np.argmin(np.abs(np.asarray(yaws, float))))
    cam = generator.config.camera_spec

    def reproj(imgs: torch.Tensor, depths: Sequence[torch.Tensor], masks: torch.Tensor, static: bool = False) -> float:
        # each view's own depth decides which of the frontal view's points it sees (the visibility test)
        ys = torch.full((prompts,), float(yaws[front]))
        errs = [reprojection_error(imgs[front], depths[front], ys, imgs[front if static else i],
                                   torch.full((prompts,), float(yaws[i])), camera=cam, mask=masks,
                                   target_depth=depths[front if static else i])
                for i in range(len(yaws)) if i != front]  # fmt: skip
        return float(torch.nanmean(torch.stack(errs)))

    def up(x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x[:, None], size=(res, res), mode="bilinear", align_corners=False)[:, 0]

    gen_depths = [up(o.depth) for o in outs]
    gen_reproj = reproj(images, gen_depths, up(outs[front].opacity))
    static_reproj = reproj(images, gen_depths, up(outs[front].opacity), static=True)
    real_reproj = reproj(real, [x["depth"] for x in renders], renders[front]["mask"])

    def read(imgs: torch.Tensor) -> dict[str, float | np.ndarray]:
        v = imgs.shape[0]
        emb, logits = judge(imgs.flatten(0, 1))
        pred = torch.stack([lg.argmax(-1) for lg in logits], 1).reshape(v, prompts, -1)
        emb = emb.reshape(v, prompts, -1)
        pairs = [(i, j) for i in range(v) for j in range(i + 1, v)]
        agree = torch.stack([(pred[i] == pred[j]).float().mean() for i, j in pairs]).mean()
        sim = torch.stack([(emb[i] * emb[j]).sum(-1).mean() for i, j in pairs]).mean()
        return {"acc": float((pred == attrs[None]).float().mean()), "agree": float(agree), "sim": float(sim),
                "per_attr": (pred == attrs[None]).float().mean((0, 1)).numpy(), "emb": emb.flatten(0, 1).numpy()}  # fmt: skip

    g, r = read(images), read(real)
    out = {
        "attribute_accuracy": g["acc"],
        "view_agreement": g["agree"],
        "view_embedding_similarity": g["sim"],
        "reprojection_error": gen_reproj,
        "static_reprojection_error": static_reproj,
        "real_reprojection_error": real_reproj,
        "depth_tv": float(depth_total_variation(depth.flatten(0, 1)).mean()),
        "embedding_fd": _frechet(g["emb"], r["emb"]),
        "real_attribute_accuracy": r["acc"],
        "real_view_agreement": r["agree"],
        "real_view_embedding_similarity": r["sim"],
        "offset_abs_mean": float(torch.cat([o.reshape(-1) for out_ in outs for o in out_.offsets]).abs().mean())
        if outs[0].offsets else 0.0,
    }
    for name, a in zip(("hair", "glasses", "smile", "skin"), g["per_attr"]):
        out[f"accuracy_{name}"] = float(a)
    return out


class StyleCodeOptimiser:
    """The optimisation-based baseline, one step at a time: per prompt, Adam on a style code ``w`` (from the
    generator's mean ``w``) to maximise the cosine between the frozen image embedding of ``synthesis(w)`` at a random
    yaw and the prompt's text embedding (CLIP-guided latent optimisation, as Latent3D / StyleCLIP-optimisation do).

    The generator must be text-free given ``w`` (no Style Code Enhancer). All prompts of ``target_text`` are
    optimised as one batch (each has its own ``w`` and loss). :meth:`step` is one forward and backward pass of one
    view and an Adam update; :attr:`w` the current codes ``(P, w_dim)``.
    """

    def __init__(self, generator: E3FaceNetGenerator, image_encoder: AttributeEncoder, target_text: TextFeatures, *,
                 lr: float = 0.05, seed: int = 0) -> None:  # fmt: skip
        if not isinstance(generator, E3FaceNetGenerator):
            raise TypeError(f"generator must be an E3FaceNetGenerator, got {type(generator).__name__}")
        if generator.enhancers:
            raise ValueError("generator must be text-free given w (built with style_code_enhancer=False)")
        if not isinstance(image_encoder, AttributeEncoder):
            raise TypeError(f"image_encoder must be an AttributeEncoder, got {type(image_encoder).__name__}")
        if not isinstance(target_text, TextFeatures):
            raise TypeError(f"target_text must be TextFeatures, got {type(target_text).__name__}")
        lr = _pos_float("lr", lr)
        self.generator, self.image_encoder = generator, image_encoder
        self.prompts = target_text.global_.shape[0]
        self.target = F.normalize(target_text.global_.detach(), dim=-1)
        self._gen = torch.Generator().manual_seed(seed)
        self._w = generator.mapping.w_avg.detach().expand(self.prompts, -1).clone().requires_grad_(True)
        self._opt = torch.optim.Adam([self._w], lr=lr)
        generator.eval()

    @property
    def w(self) -> torch.Tensor:
        return self._w.detach()

    def step(self) -> None:
        yaw = (torch.rand(self.prompts, generator=self._gen) * 2 - 1) * YAW_RANGE
        emb, _ = self.image_encoder(self.generator.synthesis(self._w, yaw).image)
        loss = (1 - (emb * self.target).sum(-1)).sum()  # a sum: each prompt's own loss, its own gradient
        (grad,) = torch.autograd.grad(loss, [self._w])
        self._w.grad = grad
        self._opt.step()


def optimise_style_codes(
    generator: E3FaceNetGenerator,
    image_encoder: AttributeEncoder,
    target_text: TextFeatures,
    *,
    steps: int = 200,
    lr: float = 0.05,
    seed: int = 0,
    callback: Callable[[int, torch.Tensor], bool | None] | None = None,
) -> tuple[torch.Tensor, list[float]]:
    """Run :class:`StyleCodeOptimiser` for up to ``steps`` steps. Returns the final codes ``(P, w_dim)`` and the wall
    time of every step; ``callback(step, w)`` runs after a step, outside the timed region (for evaluation), and a
    ``True`` return stops the optimisation there.
    """
    steps = positive_int(steps, "steps")
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable or None")
    opt = StyleCodeOptimiser(generator, image_encoder, target_text, lr=lr, seed=seed)
    times = []
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
        if callback is not None and callback(step, opt.w) is True:
            break
    return opt.w, times


@torch.no_grad()
def time_direct_generation(
    generator: E3FaceNetGenerator,
    text_encoder: TextEncoder,
    captions: Sequence[str],
    *,
    yaws: Sequence[float] = EVAL_YAWS,
    repeats: int = 5,
    seed: int = 0,
) -> float:
    """Median wall time (seconds) of E3-FaceNet's direct generation: encode the captions and render every view in
    one forward pass per view (all captions batched)."""
    if not isinstance(generator, E3FaceNetGenerator):
        raise TypeError(f"generator must be an E3FaceNetGenerator, got {type(generator).__name__}")
    repeats = positive_int(repeats, "repeats")
    generator.eval()
    z = torch.randn(len(captions), generator.config.z_dim, generator=torch.Generator().manual_seed(seed))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        text = text_encoder.encode(list(captions))
        for y in yaws:
            generator(z, torch.full((len(captions),), float(y)), text)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))
