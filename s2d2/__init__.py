"""S2D2 Explorer: self-speculative decoding of block-diffusion language models."""
__version__ = "0.1.0"
