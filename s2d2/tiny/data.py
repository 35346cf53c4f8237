"""Training data for the tiny model: Jane Austen's six novels (public domain) from Debian's
`r-cran-janeaustenr` package, plus the synthetic arithmetic task (s2d2.tasks.arithmetic).

The repository ships this code, not the prose: `austen_texts()` fetches the .deb with `apt-get download`
(never installs it), extracts it with `dpkg -x`, parses R's lazy-load database (`data/Rdata.rdx` = gzip'd
index, `Rdata.rdb` = records of a 4-byte length + zlib'd serialised R object) with the PyPI package `rdata`,
and caches one UTF-8 text file per novel under `data/austen/` (git-ignored).
"""
from __future__ import annotations

import glob
import gzip
import os
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np

NOVELS = ("emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice", "sensesensibility")
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA_DIR = REPO_ROOT / "data"
EOT = "<|endoftext|>"


def _parse_rdata_db(rdx_path: str, rdb_path: str) -> dict[str, list[str]]:
    import warnings

    import rdata

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        index = rdata.conversion.convert(rdata.parser.parse_data(gzip.decompress(Path(rdx_path).read_bytes())))
        rdb = Path(rdb_path).read_bytes()
        out: dict[str, list[str]] = {}
        for name, (off, ln) in index["variables"].items():
            rec = rdb[int(off): int(off) + int(ln)]
            obj = rdata.conversion.convert(rdata.parser.parse_data(zlib.decompress(rec[4:])))
            out[str(name)] = [str(s) for s in obj]
    return out


def _lines_to_paragraphs(lines: list[str]) -> list[str]:
    paras, cur = [], []
    for ln in lines:
        ln = ln.strip()
        if not ln:
            if cur:
                paras.append(" ".join(cur))
                cur = []
        else:
            cur.append(ln)
    if cur:
        paras.append(" ".join(cur))
    return paras


def fetch_austen(data_dir: str | os.PathLike = DEFAULT_DATA_DIR, deb: str | None = None) -> Path:
    """Download + parse the novels once; returns the cache folder with one `<novel>.txt` per novel."""
    out = Path(data_dir) / "austen"
    if all((out / f"{n}.txt").exists() for n in NOVELS):
        return out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        if deb is None:
            try:
                subprocess.run(["apt-get", "download", "r-cran-janeaustenr"], cwd=tmp, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                deb = glob.glob(os.path.join(tmp, "r-cran-janeaustenr_*.deb"))[0]
            except (OSError, subprocess.CalledProcessError, IndexError) as exc:
                raise RuntimeError(
                    "could not download Debian's r-cran-janeaustenr (run `apt-get update` once, or download the "
                    f".deb yourself and pass it as fetch_austen(deb=...)): {exc}") from exc
        subprocess.run(["dpkg", "-x", deb, os.path.join(tmp, "x")], check=True)
        d = glob.glob(os.path.join(tmp, "x", "usr", "lib", "R", "site-library", "janeaustenr", "data"))[0]
        books = _parse_rdata_db(os.path.join(d, "Rdata.rdx"), os.path.join(d, "Rdata.rdb"))
    for name in NOVELS:
        paras = _lines_to_paragraphs(books[name])
        (out / f"{name}.txt").write_text("\n\n".join(paras) + "\n", encoding="utf-8")
    return out


def austen_paragraphs(data_dir: str | os.PathLike = DEFAULT_DATA_DIR) -> dict[str, list[str]]:
    folder = fetch_austen(data_dir)
    return {n: (folder / f"{n}.txt").read_text(encoding="utf-8").split("\n\n") for n in NOVELS}


def austen_split(data_dir: str | os.PathLike = DEFAULT_DATA_DIR, val_frac: float = 0.03
                 ) -> tuple[list[str], list[str]]:
    """Documents of ~1-3 paragraphs (train) and the held-out tail of every novel (val)."""
    train, val = [], []
    for _, paras in austen_paragraphs(data_dir).items():
        cut = int(len(paras) * (1 - val_frac))
        for part, dst in ((paras[:cut], train), (paras[cut:], val)):
            buf: list[str] = []
            size = 0
            for p in part:
                buf.append(p)
                size += len(p)
                if size > 600:
                    dst.append("\n\n".join(buf))
                    buf, size = [], 0
            if buf:
                dst.append("\n\n".join(buf))
    return train, val


class DocStream:
    """Documents packed in one flat token array (each followed by <|endoftext|>), with start offsets.

    `rows(rng, n, L)` returns n windows of L tokens that each start at a random document start, so position 0
    of a row is the start of a document (as at inference, where the prompt starts at position 0).
    """

    def __init__(self, ids: np.ndarray, starts: np.ndarray) -> None:
        self.ids = ids
        self.starts = starts

    @classmethod
    def build(cls, tokenizer, docs: list[str], eot_id: int) -> "DocStream":
        enc = tokenizer.backend_tokenizer.encode_batch(docs, add_special_tokens=False) \
            if hasattr(tokenizer, "backend_tokenizer") else tokenizer.encode_batch(docs, add_special_tokens=False)
        chunks, starts, pos = [], [], 0
        for e in enc:
            ids = list(e.ids) + [eot_id]
            starts.append(pos)
            chunks.append(np.asarray(ids, dtype=np.int32))
            pos += len(ids)
        flat = np.concatenate(chunks) if chunks else np.zeros(0, np.int32)
        return cls(flat, np.asarray(starts, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def rows(self, rng: np.random.Generator, n: int, L: int) -> np.ndarray:
        valid = self.starts[self.starts + L <= len(self.ids)]
        s = rng.choice(valid, size=n)
        return np.stack([self.ids[i: i + L] for i in s]).astype(np.int64)
