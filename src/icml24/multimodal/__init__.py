"""Vision-language and multimodal models."""
