"""The lean embedding loader: the same vectors as model2vec's own path, its cache, and the fallback.

The reference is always model2vec itself: StaticModel.from_pretrained(path, quantize_to="int8").encode
followed by Embedder's normalisation. Synthetic models (a few hundred pieces) run everywhere; the real
test model (tokenlearn-static-model, x86_64 only) is skipped where it is not installed."""

import json
import logging
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import model_folder
from fakes import ROOT

import bot

#: Scripts the generated texts are drawn from: CJK, rare CJK (extensions A, B, G), emoji with ZWJ,
#: flags and skin tones, other scripts, full-width forms, combining marks, controls and odd spaces.
POOLS = ["我住在北京朝阳区今天天气很好喜欢吃火锅周末去爬山吧对花生过敏", "𠀀𠀁𠀂𪚥𰻞𡃁㐀㐁䶵龘齉鿿", "😀😂🤣❤️👍🏽👨‍👩‍👧‍👦🇨🇳🎉",
         "hello world the quick brown fox jumps over lazy dog internationalization", "こんにちはカタカナひらがな",
         "안녕하세요한국어", "привет мир", "مرحبا بالعالم", "γειά σου κόσμε", "नमस्ते", "ＡＢＣ１２３，。！？「」",
         "é e\u0301 ﬁ ① ℃ Ⅻ ㍿", "...,,,!!!???---___", "<pad><unk>", "\t\n\r\u3000\u00a0 ", "0123456789",
         "\u200b\u200d\ufeff\x01\x7f", "Ω≈ç√∫˜µ≤≥÷", "ÀÁÂÃÄÅÆÇÈÉÊË", "ǅǈ ß ẞ İ ı"]
#: Texts that have tripped tokenizers before: empty, only spaces, added tokens, runs of the unk piece.
EDGES = ["", " ", "  ", "\u3000", "<pad>", "<unk>", "a <pad> b", "x<pad>y", "...", ". . .", "Hello.. world...",
         "😀", "𠀀", "▁", "<pad><pad>", " <unk> "]


def texts(n, seed=0, pools=POOLS):
    """n texts: the edge cases, then mixtures of the pools, one in ten long (up to 4,000 characters)."""
    rng = random.Random(seed)
    out = list(EDGES)
    while len(out) < n:
        size = rng.randint(500, 4000) if rng.random() < 0.1 else rng.randint(1, 40)
        parts, length = [], 0
        while length < size:
            pool = rng.choice(pools)
            i = rng.randrange(len(pool))
            parts.append(pool[i:i + rng.randint(1, 12)])
            if rng.random() < 0.3:
                parts.append(rng.choice([" ", "  ", "\n", "<pad>", " <pad> ", "<unk>", ".", "▁"]))
            length += len(parts[-1])
        out.append("".join(parts))
    return out[:n]


def unit(vecs):
    """Embedder.encode's normalisation of model2vec's output."""
    vecs = np.asarray(vecs).astype(np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.where(norms == 0, 1, norms)


def reference(path):
    from model2vec import StaticModel
    return StaticModel.from_pretrained(str(path), force_download=False, quantize_to="int8")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Each test prepares into its own cache and loads afresh."""
    monkeypatch.setattr(bot, "EMBED_CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(bot, "_MODEL_CACHE", {})
    return tmp_path / "cache"


# Synthetic models ##########################################################

ALPHABET = list("abcde北京上海的我😀.") + ["\u2581"]


def synthetic_vocab(rng, size=400):
    """Unigram pieces over a small alphabet; piece 2 is '.', and it is the unk id (as in the test model)."""
    vocab, seen = [["<pad>", 0.0], ["<unk>", 0.0], [".", -2.0]], {"<pad>", "<unk>", "."}
    while len(vocab) < size:
        piece = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 5)))
        if piece not in seen:
            seen.add(piece)
            vocab.append([piece, -rng.uniform(0.5, 14.0)])  # 17-digit scores: serde_json's rounding matters
    return vocab


def synthetic_model(folder, *, seed=0, quantized=False, max_length=None):
    """A model2vec folder with the test model's quirks: a single_word <pad> added token, a non-normalized <unk>,
    the unk id on a real piece, a padding section; NFKC + lowercase, Metaspace. Float32 table, or (quantized)
    int8 vectors for 50 clusters with a per-piece mapping and weights."""
    from safetensors.numpy import save_file
    rng = random.Random(seed)
    vocab = synthetic_vocab(rng)
    tok = {"version": "1.0", "truncation": None,
           "padding": {"strategy": {"Fixed": 0}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                       "pad_type_id": 0, "pad_token": "<pad>"},
           "added_tokens": [{"id": 0, "content": "<pad>", "single_word": True, "lstrip": True, "rstrip": True,
                             "normalized": True, "special": True},
                            {"id": 1, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True}],
           "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}]},
           "post_processor": None, "decoder": None,
           "model": {"type": "Unigram", "unk_id": 2, "vocab": vocab, "byte_fallback": False}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    config = {"model_type": "model2vec", "normalize": not quantized}
    if max_length:
        config["max_length"] = max_length
    gen = np.random.default_rng(seed)
    if quantized:
        config.update(embedding_dtype="int8", vocabulary_quantization=50)
        save_file({"embeddings": gen.integers(-127, 128, (50, 8), dtype=np.int8),
                   "mapping": gen.integers(0, 50, len(vocab), dtype=np.int64),
                   "weights": gen.uniform(0.2, 1.5, len(vocab)).astype(np.float32)}, str(folder / "model.safetensors"))
    else:
        save_file({"embeddings": gen.standard_normal((len(vocab), 8), dtype=np.float32)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config))
    return folder


SYNTHETIC_POOLS = ["abcde北京上海的我😀.▁", "ABCDE ＡＢＣ", "<pad> <unk>", "   ", "xyz火车🚂"]


@pytest.mark.parametrize("kind", [dict(max_length=8), dict(quantized=True), dict(seed=3)])
def test_synthetic_models_give_model2vecs_vectors(tmp_path, kind):
    folder = synthetic_model(tmp_path / "model", **kind)
    sample = texts(1500, seed=1, pools=SYNTHETIC_POOLS)
    lean, ref = bot.embed_load(str(folder)), reference(folder)
    assert lean.path_kind.startswith("lean loader")
    for t in sample[:300]:
        assert lean.tokenize(t) == ref.tokenize([t[:ref.max_length * ref.median_token_length] if ref.max_length else t])[0]
    diff = np.abs(unit(lean.encode(sample)) - unit(ref.encode(sample, use_multiprocessing=False)))
    assert diff.max() <= 1e-6


def test_viterbi_matches_tokenizers_unigram_with_repeated_pieces_and_unk_runs():
    from tokenizers import Tokenizer
    from tokenizers.models import Unigram
    rng = random.Random(7)
    vocab = synthetic_vocab(rng, 300)
    vocab += [[vocab[40][0], -0.25], [vocab[41][0], -30.0]]  # repeated pieces: the last id (and score) wins
    hf = Tokenizer(Unigram([tuple(v) for v in vocab], 2, False))
    ids = dict(zip([p for p, _ in vocab], range(len(vocab))))
    scores = [s for _, s in vocab]
    reach = {}
    for p in ids:
        reach[p[0]] = max(reach.get(p[0], 0), len(p))
    unk_score = min(scores) - 10.0
    for _ in range(3000):
        s = "".join(rng.choice(ALPHABET + ["z", "火", ".."]) for _ in range(rng.randint(1, 30)))
        assert bot._unigram_ids(s, ids, scores, 2, unk_score, reach) == hf.encode(s).ids, s


def test_scores_are_parsed_as_tokenizers_parses_them():
    from tokenizers import Tokenizer
    rng = random.Random(5)
    numbers = ["0.0", "-0.0", "-5", "0", "-1e-05", "-1.5E+2", "-12345678901234567890.5", "-0.000123456789012345678901",
               "-1234567890123456789012345", "-1e-400", "-3.4635426998138428"]
    for _ in range(3000):
        x = -rng.uniform(0, 30) * 10 ** rng.uniform(-6, 1)
        numbers.append(rng.choice([repr(x), f"{x:.17g}", f"{x:.20f}", f"{x:.6e}", f"{x:.25g}"]))
    vocab = ", ".join(f'["p{i}", {n}]' for i, n in enumerate(numbers))
    text = ('{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null, '
            '"pre_tokenizer": null, "post_processor": null, "decoder": null, '
            '"model": {"type": "Unigram", "unk_id": 0, "vocab": [' + vocab + '], "byte_fallback": false}}')
    theirs = [s for _, s in json.loads(Tokenizer.from_str(text).to_str())["model"]["vocab"]]
    ours = [bot._serde_float(n) if any(c in n for c in ".eE") else float(int(n)) for n in numbers]
    assert ours == theirs
    assert sum(bot._serde_float(n) != float(n) for n in numbers) > 50  # Python's own parser would differ


def test_prepare_reads_scores_as_tokenizers_does(tmp_path):
    """'ab' scores -1.0189544801599961 in the file; tokenizers reads it as -1.018954480159996, which ties with
    'a' (0.0) + 'b' (-1.018954480159996): the tie keeps 'ab'. Python's own float() would split it."""
    from safetensors.numpy import save_file
    folder = tmp_path / "tie"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(
        '{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null, '
        '"pre_tokenizer": null, "post_processor": null, "decoder": null, "model": {"type": "Unigram", "unk_id": 0, '
        '"vocab": [["<unk>", 0.0], ["a", 0.0], ["b", -1.018954480159996], ["ab", -1.0189544801599961]], '
        '"byte_fallback": false}}')
    (folder / "config.json").write_text("{}")
    save_file({"embeddings": np.eye(4, dtype=np.float32)}, str(folder / "model.safetensors"))
    lean = bot.embed_load(str(folder))
    assert lean.tokenize("ab") == reference(folder).tokenize(["ab"])[0] == [3]


def test_cache_is_prepared_once_and_again_when_the_model_changes(tmp_path, cache_dir, caplog):
    folder = synthetic_model(tmp_path / "model")
    with caplog.at_level(logging.INFO, logger="mnemo"):
        first = bot.embed_prepare(folder)
        assert bot.embed_prepare(folder) == first
    assert sum("preparing a compact copy once" in r.getMessage() for r in caplog.records) == 1
    assert {p.name for p in first.iterdir()} == {"meta.json", "vocab.txt", "scores.f64", "table.i8"}
    assert json.loads((first / "meta.json").read_text())["version"] == bot.EMBED_CACHE_VERSION
    synthetic_model(tmp_path / "model", seed=9)  # a new tokenizer.json and table
    assert bot.embed_prepare(folder) != first
    assert not first.exists()  # the copy of the old model is removed
    assert [p for p in cache_dir.iterdir() if ".tmp" in p.name] == []


def test_hub_id_is_found_in_the_hugging_face_cache_without_huggingface_hub(tmp_path, monkeypatch):
    snapshot = tmp_path / "hub" / "models--someone--tiny" / "snapshots" / "abc123"
    synthetic_model(snapshot)
    (tmp_path / "hub" / "models--someone--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--tiny" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # importing it would fail
    assert bot.embed_resolve("someone/tiny") == snapshot
    assert bot.Embedder("someone/tiny").model.path_kind.startswith("lean loader")
    with pytest.raises(FileNotFoundError):
        bot.embed_resolve("./no/such/folder")


def test_unreadable_tokenizer_falls_back_to_model2vec_and_says_so(tmp_path, caplog):
    from safetensors.numpy import save_file
    folder = tmp_path / "wordlevel"
    folder.mkdir()
    words = {"[UNK]": 0, "北京": 1, "上海": 2, "我": 3, "住": 4, "在": 5}
    (folder / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": words, "unk_token": "[UNK]"}}, ensure_ascii=False), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({"normalize": True}))
    save_file({"embeddings": np.random.default_rng(0).standard_normal((6, 4), dtype=np.float32)}, str(folder / "model.safetensors"))
    with caplog.at_level(logging.WARNING, logger="mnemo"):
        e = bot.Embedder(str(folder))
    assert e.error is None and e.model.path_kind.startswith("model2vec")
    assert any("loading it with model2vec instead" in r.getMessage() for r in caplog.records)
    assert e.encode(["我 住 在 北京"]).shape == (1, 4)


def test_unwritable_cache_falls_back_to_model2vec(tmp_path, monkeypatch, caplog):
    folder = synthetic_model(tmp_path / "model")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setattr(bot, "EMBED_CACHE_DIR", blocker / "cache")
    with caplog.at_level(logging.WARNING, logger="mnemo"):
        model = bot.embed_load(str(folder))
    assert model.path_kind.startswith("model2vec")
    assert any("lean loader can't use it" in r.getMessage() for r in caplog.records)


# The real test model ########################################################

#: bot.embed_prepare(argv[3]) into the cache folder argv[2], bot.py from the folder argv[1]; prints what it returns.
PREPARE = ("import sys; from pathlib import Path; sys.path[0] = sys.argv[1]; import bot; "
           "bot.EMBED_CACHE_DIR = Path(sys.argv[2]); print(bot.embed_prepare(sys.argv[3]))")


@pytest.fixture(scope="module")
def test_model(tmp_path_factory):
    path = model_folder()
    if path is None:
        pytest.skip("tokenlearn-static-model (x86_64 only) is not installed")
    cache = tmp_path_factory.mktemp("embed-cache")
    # bot.embed_prepare in a Python of its own (the other core) while model2vec loads the reference here
    prepare = subprocess.Popen([sys.executable, "-c", PREPARE, str(ROOT), str(cache), path],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ref = reference(path)
        out, err = prepare.communicate(timeout=600)
    finally:
        prepare.kill()
    assert prepare.returncode == 0, err
    assert Path(out.strip()).parent == cache
    return path, bot.LeanModel(out.strip()), ref, cache


@pytest.mark.parametrize("text", ["我住在北京", "我对花生过敏，记住了吗？", "生僻字𠀀𪚥𰻞也要算", "今天好开心😀👍🏽",
                                  "中文English混排mixed", "Hello.. world...", "a <pad> b", "x<pad>y", "<unk>在哪", ""])
def test_test_model_token_ids_match_model2vec(test_model, text):
    _, lean, ref, _ = test_model
    assert lean.tokenize(text) == ref.tokenize([text])[0]


def test_test_model_vectors_match_model2vec_on_5000_texts(test_model):
    _, lean, ref, _ = test_model
    sample = texts(5000, seed=11)
    ours, theirs = unit(lean.encode(sample)), unit(ref.encode(sample, use_multiprocessing=False))
    assert np.abs(ours - theirs).max() <= 1e-6
    assert (ours == theirs).all(axis=1).mean() > 0.99  # in practice bit for bit


def test_embedder_uses_the_lean_loader_and_doctor_says_so(test_model, tmp_path, capsys, monkeypatch):
    path, _, _, cache = test_model
    monkeypatch.setattr(bot, "EMBED_CACHE_DIR", cache)  # the copy test_model prepared (preparing is tested above)
    e = bot.Embedder(path)
    assert e.error is None and e.dim == 64 and e.model.path_kind.startswith("lean loader")
    assert 0 < e.floor < 1
    cfg = bot.config_load(environ={"EMBED_MODEL": path, "BOT_DB": str(tmp_path / "x.db"), "LLM_TIMEOUT": "0.5",
                                   "LLM_BASE_URL": "http://127.0.0.1:9/v1"}, dotenv=tmp_path / "none")
    bot.cli_doctor(cfg)
    line = next(x for x in capsys.readouterr().out.splitlines() if "embedding model" in x)
    assert line.startswith("ok") and "lean loader" in line and "MB of this process's memory" in line
