"""Fuzz cases for E3-FaceNet's public API (see tests/test_fuzz_api.py)."""

import torch

from icml24.vision.e3_facenet import (
    AttributeEncoder,
    CameraSpec,
    E3FaceNetConfig,
    E3FaceNetGenerator,
    FiLMNeRF,
    GANConfig,
    MappingNetwork,
    ModulatedConv2d,
    SemanticEncoders,
    StyleCodeEnhancer,
    StyleCodeOptimiser,
    TextEncoder,
    camera_rays,
    caption_faces,
    contrastive_loss,
    depth_total_variation,
    discriminator_loss,
    evaluate_generator,
    generator_adversarial_loss,
    geometric_regularization,
    make_tokenizer,
    offset_penalty,
    optimise_style_codes,
    parse_caption,
    point_map,
    pretrain_semantic_encoders,
    r1_penalty,
    render_toy_faces,
    reprojection_error,
    sample_attributes,
    time_direct_generation,
    train_attribute_classifier,
    train_e3facenet,
    virtual_normals,
    volume_render,
)
from icml24.vision.e3_facenet.networks import TwoLogitDiscriminator

torch.manual_seed(0)
TOK = make_tokenizer()
TEXT_ENC = TextEncoder(tokenizer=TOK).eval().requires_grad_(False)
IMG_ENC = AttributeEncoder(attribute_sizes=(3, 2, 2, 2)).eval().requires_grad_(False)
ENCODERS = SemanticEncoders(TEXT_ENC, IMG_ENC)
CAPS = ["a face with red hair, dark skin, a smile and glasses", "someone with black hair, pale skin, a smile and no glasses"]
with torch.no_grad():
    TEXT = TEXT_ENC.encode(CAPS)
G_BASE = E3FaceNetGenerator(config=E3FaceNetConfig(style_code_enhancer=False))
G_FULL = E3FaceNetGenerator()
ATTRS = torch.tensor([[0, 1, 0, 1], [2, 0, 1, 0]])
YAW = torch.tensor([0.1, -0.2])
Z = torch.randn(2, 32)
PTS = torch.randn(1, 3, 8, 8)
DEPTHS = torch.linspace(1.0, 2.0, 4)
SIGMA = torch.rand(1, 2, 4)
FEATS = torch.rand(1, 2, 4, 3)
IMG = torch.rand(2, 3, 16, 16) * 2 - 1
DEPTH16 = torch.full((2, 16, 16), 3.5)
EMB = torch.nn.functional.normalize(torch.randn(2, 8), dim=-1)
FORWARD = "a forward pass propagates NaN like any torch layer (a finiteness check would cost a device sync per call)"


def generator_forward(z, yaw, edit_alpha=0.5, truncation_psi=1.0):
    """E3FaceNetGenerator()(z, yaw, text, edit_text=text, ...)."""
    return G_FULL(z, yaw, TEXT, edit_text=TEXT, edit_alpha=edit_alpha, truncation_psi=truncation_psi)


def mapping_forward(z, text_global):
    """MappingNetwork(z_dim=32, text_dim=32, w_dim=64)(z, text_global)."""
    return MappingNetwork(z_dim=32, text_dim=32, w_dim=64)(z, text_global)


def nerf_forward(points, w):
    """FiLMNeRF(w_dim=8)(points, w)."""
    return FiLMNeRF(w_dim=8)(points, w)


def modconv_forward(x, w):
    """ModulatedConv2d(in_channels=4, out_channels=2, kernel_size=3, w_dim=5)(x, w)."""
    return ModulatedConv2d(in_channels=4, out_channels=2, kernel_size=3, w_dim=5)(x, w)


def sce_forward(x, tokens, mask):
    """StyleCodeEnhancer(channels=4, resolution=4, text_dim=6, w_dim=5)(x, tokens, mask)."""
    return StyleCodeEnhancer(channels=4, resolution=4, text_dim=6, w_dim=5)(x, tokens, mask)


def text_forward(ids, mask):
    """TextEncoder(tokenizer=make_tokenizer())(ids, mask)."""
    return TEXT_ENC(ids, mask)


def disc_forward(images, text_global):
    """TwoLogitDiscriminator(text_dim=32)(images, text_global)."""
    return TwoLogitDiscriminator(text_dim=32)(images, text_global)


def attr_forward(images):
    """AttributeEncoder(attribute_sizes=(3, 2, 2, 2))(images)."""
    return IMG_ENC(images)


def r1_of(logits, gamma):
    """r1_penalty(logits, images, gamma=...) on fresh images that require grad."""
    x = torch.ones(2, 3, 2, 2, requires_grad=True)
    return r1_penalty(logits * x.sum((1, 2, 3)) if logits.shape == (2,) else logits, x, gamma=gamma)


IDS, MASK = TOK.batch(CAPS)

FUZZ_CASES = [
    dict(fn=CameraSpec, kwargs={"radius": 4.0}, invalid={"radius": [0.0, -1.0, "4"], "fov_degrees": [0.0, 180.0],
                                                         "near": [-1.0], "far": [1.0]}),
    dict(fn=camera_rays, args=(YAW,), kwargs={"resolution": 4},
         invalid={"yaw": [YAW[None], torch.tensor([1, 2]), "0.1", None], "resolution": [0, 2.5, "4"],
                  "camera": ["cam", 3]}),
    dict(fn=sample_attributes, args=(3,), invalid={"n": [0, 1.5, "3", None], "generator": [0, "g"]}),
    dict(fn=render_toy_faces, args=(ATTRS, YAW), kwargs={"resolution": 8, "supersample": 1},
         invalid={"attributes": [ATTRS.float(), ATTRS[:, :3], torch.tensor([[3, 0, 0, 0]]), "a", None],
                  "yaw": [YAW[:1], torch.tensor([0, 1]), None], "resolution": [0, 8.0], "supersample": [0, "2"]}),
    dict(fn=caption_faces, args=(ATTRS,), kwargs={"seed": 1},
         invalid={"attributes": [ATTRS[:, :2], torch.tensor([[0, 2, 0, 0]]), [[0, 1, 0, 1]]], "seed": [1.5, "1", None]}),
    dict(fn=parse_caption, args=(CAPS[0],), invalid={"caption": ["a face", "red hair and black hair, a smile", 3, None]}),
    dict(fn=make_tokenizer),
    dict(fn=volume_render, args=(SIGMA, FEATS, DEPTHS), kwargs={"far": 3.0, "background": torch.zeros(1, 3)},
         invalid={"sigma": [SIGMA[0], SIGMA.long(), "s"], "features": [FEATS[..., 0], FEATS[:, :1]],
                  "depths": [DEPTHS.flip(0), DEPTHS[:3], None], "far": [1.5, "3", None],
                  "background": [torch.zeros(2, 3), "bg"]}),
    dict(fn=point_map, args=(torch.full((1, 2, 2), 3.0), torch.zeros(1, 4, 3), torch.ones(1, 4, 3)),
         invalid={"depth": [torch.ones(2, 2), "d"], "origins": [torch.zeros(1, 3, 3), None],
                  "directions": [torch.ones(1, 4, 2)]}),
    dict(fn=virtual_normals, args=(PTS,), invalid={"points": [PTS[:, :2], PTS[..., :2, :2], PTS[0], "p"]}),
    dict(fn=geometric_regularization, args=(PTS,), kwargs={"normal_weight": 0.5, "shift": 2},
         invalid={"points": [PTS[:, :, :4, :4], PTS[0], None], "normal_weight": [-1.0, "0.5"], "shift": [0, 1.5]}),
    dict(fn=depth_total_variation, args=(torch.rand(2, 4, 4),),
         invalid={"depth": [torch.rand(4, 4), torch.rand(1, 1, 4), torch.ones(1, 3, 3, dtype=torch.long)]}),
    dict(fn=reprojection_error, args=(IMG, DEPTH16, YAW, IMG, YAW), kwargs={"camera": CameraSpec()},
         invalid={"source_image": [IMG[:, :, :8], IMG[0]], "source_depth": [DEPTH16[:, :8], None],
                  "source_yaw": [YAW[:1], 0.1], "target_image": [IMG[:1], "img"], "target_yaw": [YAW[None]],
                  "camera": ["cam", None], "mask": [DEPTH16[:1]]}),
    dict(fn=reprojection_error, args=(IMG, DEPTH16, YAW, IMG, YAW),
         kwargs={"camera": CameraSpec(), "target_depth": DEPTH16, "depth_tolerance": 0.05},
         invalid={"target_depth": [DEPTH16[:, :8], "d", DEPTH16[0]], "depth_tolerance": [0.0, -1.0, "0.1", True]}),
    dict(fn=generator_adversarial_loss, args=(torch.zeros(3), torch.zeros(3)),
         invalid={"realism": [torch.zeros(3, 1), "r", torch.zeros(3, dtype=torch.long)], "match": [torch.zeros(2)]}),
    dict(fn=discriminator_loss, args=(torch.zeros(3), torch.zeros(3), torch.zeros(3), torch.zeros(3)),
         invalid={"real_realism": [torch.zeros(3, 2)], "fake_realism": [None, "f"], "real_match": [torch.zeros(2)],
                  "fake_match": [torch.zeros(4)]}),
    dict(fn=r1_of, args=(torch.ones(2),), kwargs={"gamma": 1.0}, invalid={"gamma": [-1.0, "1", None]},
         covers=("r1_penalty",)),
    dict(fn=contrastive_loss, args=(EMB, EMB), kwargs={"temperature": 0.1, "groups": [0, 1]},
         invalid={"image_embedding": [EMB[0], "e"], "text_embedding": [EMB[:1], EMB[:, :4]],
                  "temperature": [0.0, -1.0, "0.1"], "groups": [[0, 1, 2], [0.5, 1.0]]}),
    dict(fn=offset_penalty, args=([torch.ones(2, 3)],), invalid={"offsets": [torch.ones(2, 3), ["a"], 3]}),
    dict(fn=generator_forward, args=(Z, YAW), invalid={"z": [Z[:, :8], Z[0], "z"], "yaw": [YAW[:1], YAW[None]],
                                                        "edit_alpha": ["a", None], "truncation_psi": ["1", None]},
         allowed={"z": FORWARD, "yaw": "NaN yaws are rejected by camera_rays", "edit_alpha": FORWARD,
                  "truncation_psi": FORWARD}, covers=("E3FaceNetGenerator",)),
    dict(fn=E3FaceNetConfig, invalid={"z_dim": [0, 2.5, "32"], "w_dim": [0], "text_dim": [-1], "low_resolution": [1],
                                      "samples_per_ray": [1], "style_code_enhancer": ["yes"],
                                      "offset_scale": ["1", None], "camera": [(4.0, 28.0), (4.0, 28.0, 5.0, 3.0)]}),
    dict(fn=mapping_forward, args=(Z, TEXT.global_), invalid={"z": [Z[:, :4], None], "text_global": [TEXT.global_[:1], None]},
         allowed={"z": FORWARD, "text_global": FORWARD}, covers=("MappingNetwork",)),
    dict(fn=nerf_forward, args=(torch.rand(2, 5, 3), torch.rand(2, 8)),
         invalid={"points": [torch.rand(2, 5, 2), None], "w": [torch.rand(3, 8), "w"]},
         allowed={"points": FORWARD, "w": FORWARD}, covers=("FiLMNeRF",)),
    dict(fn=modconv_forward, args=(torch.rand(2, 4, 5, 5), torch.rand(2, 5)),
         invalid={"x": [torch.rand(2, 3, 5, 5), None], "w": [torch.rand(1, 5)]},
         allowed={"x": FORWARD, "w": FORWARD}, covers=("ModulatedConv2d",)),
    dict(fn=sce_forward, args=(torch.rand(2, 4, 4, 4), torch.rand(2, 3, 6), torch.ones(2, 3)),
         invalid={"x": [torch.rand(2, 4, 5, 5), None], "tokens": [torch.rand(2, 3, 5)], "mask": [torch.ones(2, 2)]},
         allowed={"x": FORWARD, "tokens": FORWARD, "mask": "the mask is cast to bool"}, covers=("StyleCodeEnhancer",)),
    dict(fn=text_forward, args=(IDS, MASK), invalid={"ids": [IDS.float(), IDS + 1000, "ids"], "mask": [MASK[:1], MASK * 0]},
         covers=("TextEncoder", "TextFeatures")),
    dict(fn=disc_forward, args=(IMG, TEXT.global_), invalid={"images": [IMG[:, :1], None], "text_global": [TEXT.global_[:1], None]},
         allowed={"images": FORWARD, "text_global": FORWARD}, covers=("TwoLogitDiscriminator",)),
    dict(fn=attr_forward, args=(IMG,), invalid={"images": [IMG[:, :, :8, :8], "x"]}, allowed={"images": FORWARD},
         covers=("AttributeEncoder",)),
    dict(fn=GANConfig, invalid={"steps": [-1, 2.5], "batch_size": [1, "32"], "lr": [0.0, "1e-3"], "r1_every": [0],
                                "r1_gamma": [-1.0], "clip_weight": [-0.5], "temperature": [0.0], "betas": [(0.5,), (1.0, 0.9)]}),
    dict(fn=pretrain_semantic_encoders, kwargs={"steps": 1, "batch_size": 4},
         invalid={"steps": [0, 1.5], "batch_size": [1, "4"], "lr": [0.0, "x"], "temperature": [-1.0], "seed": [1.5, None]},
         covers=("SemanticEncoders",)),
    dict(fn=train_attribute_classifier, kwargs={"steps": 1, "batch_size": 4},
         invalid={"steps": [0], "batch_size": [1], "lr": [-1.0], "seed": ["0"]}),
    dict(fn=train_e3facenet, kwargs={"config": E3FaceNetConfig(), "train_config": GANConfig(steps=1, batch_size=4),
                                     "encoders": ENCODERS},
         invalid={"config": [None, "cfg", E3FaceNetConfig(text_dim=16, style_code_enhancer=False)],
                  "train_config": [None, {}], "encoders": [None, (TEXT_ENC, IMG_ENC)], "seed": [1.5, None],
                  "log_every": [0]}, covers=("TrainedGenerator", "GeneratorOutput")),
    dict(fn=evaluate_generator, args=(G_BASE, TEXT_ENC, IMG_ENC), kwargs={"prompts": 4},
         invalid={"generator": [None, IMG_ENC], "text_encoder": ["t"], "judge": [None], "prompts": [1, 2.5],
                  "yaws": [(0.0,), "0.1"]}),
    dict(fn=optimise_style_codes, args=(G_BASE, IMG_ENC, TEXT), kwargs={"steps": 2},
         invalid={"generator": [G_FULL, None], "image_encoder": [None], "target_text": [TEXT.global_, None],
                  "steps": [0, 1.5], "lr": [0.0, "0.1"], "callback": [3]}),
    dict(fn=StyleCodeOptimiser, args=(G_BASE, IMG_ENC, TEXT), kwargs={"lr": 0.05, "seed": 0},
         invalid={"generator": [G_FULL, None], "image_encoder": [None, "enc"], "target_text": [TEXT.global_, None],
                  "lr": [0.0, -1.0, "0.1"]}),
    dict(fn=time_direct_generation, args=(G_FULL, TEXT_ENC, CAPS), kwargs={"repeats": 1},
         invalid={"generator": [None], "repeats": [0, 1.5]}),
]
