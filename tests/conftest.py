"""Fixtures shared by every test. The builders behind them are in tests/support/tiny_models.py; importing it first
sets the offline environment before transformers or huggingface_hub is imported anywhere."""
from tests.support.tiny_models import tiny_qwen2_fixture, tiny_qwen3_fixture  # noqa: F401  (pytest finds them here)
