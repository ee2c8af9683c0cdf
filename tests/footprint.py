#!/usr/bin/env python3
"""How much memory and time the whole bot needs with each embedding model: measured, never asserted.

    python tests/footprint.py                 # median of 3, JSON on stdout (about 5 minutes)
    python tests/footprint.py --runs 1 --skip-shape

For each of EMBED_MODEL=off, the small test model (tokenlearn-static-model) and a folder shaped like
the default minishlab/potion-multilingual-128M (500,353 Unigram pieces x 256 float32, built here from
the test model's tokenizer.json because the hub may be out of reach), it starts `python bot.py` in a
child process with a fake LLM and a fake NapCat, and reports: seconds to the ready line, seconds to
the first answer, idle RSS (VmRSS) after a few messages, peak RSS (VmHWM), and, in another child,
how many single sentences a second Embedder.encode turns into vectors. The default-shaped model is
measured on its first start (the one-off preparation of the lean loader's cache) and on the starts
after it. `bench` can call main() / measure() and print the same JSON.
"""

import argparse
import asyncio
import importlib.util
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The default-shaped model ###################################################

#: Pieces and width of minishlab/potion-multilingual-128M.
SHAPE_PIECES = 500_353
SHAPE_DIM = 256
#: Bumped when shape_model() builds something different, so an old folder is rebuilt.
SHAPE_VERSION = 1
#: Where the 500 MB default-shaped folder is kept between runs.
SHAPE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mnemo-footprint" / "potion-shape"


def test_model_folder():
    """The real 64-d int8 model2vec model shipped in tokenlearn-static-model, or None."""
    spec = importlib.util.find_spec("static_model")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    return path if path.exists() else None


def shape_model(dest=SHAPE_DIR, pieces=SHAPE_PIECES, dim=SHAPE_DIM, seed=11):
    """Builds (once) a model2vec folder shaped like the default model: the test model's tokenizer.json
    padded with pieces made by joining two of its pieces (scores drawn near the sum of theirs, so the
    new pieces are used), and a random float32 table. Returns the folder."""
    import numpy as np
    dest = Path(dest)
    stamp = dest / "footprint-shape.json"
    want = {"version": SHAPE_VERSION, "pieces": pieces, "dim": dim, "seed": seed}
    if stamp.exists() and json.loads(stamp.read_text()) == want:
        return dest
    source = test_model_folder()
    if source is None:
        raise RuntimeError("tokenlearn-static-model is not installed (x86_64 only): no tokenizer to build from")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tok = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    seen = {p for p, _ in vocab}
    rng = random.Random(seed)
    body = vocab[4:]  # the specials and the odd unk piece stay as they are
    while len(vocab) < pieces:
        (a, sa), (b, sb) = rng.choice(body), rng.choice(body)
        piece = a + (b[1:] if b.startswith("\u2581") and len(b) > 1 else b)
        if piece in seen:
            continue
        seen.add(piece)
        vocab.append([piece, sa + sb + rng.uniform(-1.0, 2.0)])
    (tmp / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    config = {"model_type": "model2vec", "architectures": ["StaticModel"], "tokenizer_name": "BAAI/bge-m3",
              "apply_pca": dim, "apply_zipf": True, "hidden_dim": dim, "seq_length": 1000000, "normalize": True}
    (tmp / "config.json").write_text(json.dumps(config, indent=4))
    nbytes = pieces * dim * 4
    header = json.dumps({"embeddings": {"dtype": "F32", "shape": [pieces, dim], "data_offsets": [0, nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    gen = np.random.default_rng(seed)
    with open(tmp / "model.safetensors", "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        for start in range(0, pieces, 16384):  # in blocks: building it must not need 500 MB of memory
            rows = min(16384, pieces - start)
            f.write((gen.standard_normal((rows, dim), dtype=np.float32) * 0.05).tobytes())
    (tmp / "footprint-shape.json").write_text(json.dumps(want))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest
