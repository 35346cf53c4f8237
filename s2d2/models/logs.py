"""Quiet loading: transformers' warnings, load reports and progress bars silenced while a checkpoint loads (real
problems surface as one ModelLoadError instead), and the first line of an exception for that message."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def quiet() -> Iterator[None]:
    """Silence transformers' warnings and load report while loading: the expected "model of type sdar"
    warning is noise, and real problems surface as one ModelLoadError instead."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    bars = logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()  # the "Loading weights" bar
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


def first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]

