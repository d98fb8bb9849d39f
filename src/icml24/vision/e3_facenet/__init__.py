"""E3-FaceNet (Zhang, Zhou, Zheng, Du, Luo, Peng, Sun, Ji, ICML 2024, https://arxiv.org/abs/2403.06702): Fast
Text-to-3D-Aware Face Generation and Manipulation via Direct Cross-modal Mapping and Geometric Regularization.

A text-conditioned 3D-aware GAN: the caption is mapped directly into the style space of a NeRF-plus-upsampler
generator (one forward pass per view, no per-prompt optimisation); a Style Code Enhancer adds token-level
offsets ``dw_b`` to the style code of every upsampler block, and a Geometric Regularization smooths the rendered
surface (``L_loc + 0.5 L_normal`` on points and virtual normals lifted from the expected depth).

* Toy world (:mod:`.faces`): :func:`render_toy_faces` (ray-cast ellipsoid heads with four attributes),
  :func:`caption_faces` / :func:`parse_caption`, :func:`sample_attributes`, :func:`camera_rays`, :class:`CameraSpec`.
* Geometry (:mod:`.geometry`): :func:`volume_render`, :func:`point_map`, :func:`virtual_normals`,
  :func:`geometric_regularization`, :func:`depth_total_variation`, :func:`reprojection_error`.
* Networks (:mod:`.networks`): :class:`TextEncoder`, :class:`MappingNetwork`, :class:`FiLMNeRF`,
  :class:`ModulatedConv2d`, :class:`StyleCodeEnhancer`, :class:`E3FaceNetGenerator` (:class:`E3FaceNetConfig`),
  :class:`TwoLogitDiscriminator`, :class:`AttributeEncoder`.
* Losses (:mod:`.losses`): :func:`generator_adversarial_loss`, :func:`discriminator_loss`, :func:`r1_penalty`,
  :func:`contrastive_loss`, :func:`offset_penalty`.
* Training (:mod:`.training`): :func:`pretrain_semantic_encoders`, :func:`train_attribute_classifier`,
  :func:`train_e3facenet` (:class:`GANConfig`), :func:`evaluate_generator`, :func:`optimise_style_codes` / :class:`StyleCodeOptimiser` (the
  optimisation baseline), :func:`time_direct_generation`.
"""

from icml24.vision.e3_facenet.faces import (
    ATTRIBUTES,
    CameraSpec,
    camera_rays,
    caption_faces,
    make_tokenizer,
    parse_caption,
    render_toy_faces,
    sample_attributes,
)
from icml24.vision.e3_facenet.geometry import (
    depth_total_variation,
    geometric_regularization,
    point_map,
    reprojection_error,
    virtual_normals,
    volume_render,
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
    FiLMNeRF,
    GeneratorOutput,
    MappingNetwork,
    ModulatedConv2d,
    StyleCodeEnhancer,
    TextEncoder,
    TextFeatures,
    TwoLogitDiscriminator,
)
from icml24.vision.e3_facenet.training import (
    EVAL_YAWS,
    GANConfig,
    SemanticEncoders,
    StyleCodeOptimiser,
    TrainedGenerator,
    evaluate_generator,
    optimise_style_codes,
    pretrain_semantic_encoders,
    time_direct_generation,
    train_attribute_classifier,
    train_e3facenet,
)

SLUG = "e3-facenet"

__all__ = [
    "ATTRIBUTES",
    "EVAL_YAWS",
    "SLUG",
    "AttributeEncoder",
    "CameraSpec",
    "E3FaceNetConfig",
    "E3FaceNetGenerator",
    "FiLMNeRF",
    "GANConfig",
    "GeneratorOutput",
    "MappingNetwork",
    "ModulatedConv2d",
    "SemanticEncoders",
    "StyleCodeEnhancer",
    "TextEncoder",
    "TextFeatures",
    "TrainedGenerator",
    "TwoLogitDiscriminator",
    "camera_rays",
    "caption_faces",
    "contrastive_loss",
    "depth_total_variation",
    "discriminator_loss",
    "evaluate_generator",
    "generator_adversarial_loss",
    "geometric_regularization",
    "make_tokenizer",
    "offset_penalty",
    "StyleCodeOptimiser",
    "optimise_style_codes",
    "parse_caption",
    "point_map",
    "pretrain_semantic_encoders",
    "r1_penalty",
    "render_toy_faces",
    "reprojection_error",
    "sample_attributes",
    "time_direct_generation",
    "train_attribute_classifier",
    "train_e3facenet",
    "virtual_normals",
    "volume_render",
]
