"""Vision: the papers' vision models and the shared small vision backbones (:mod:`icml24.vision.tiny_vit`,
the tiny ViT that the vision, multimodal and privacy papers share)."""
