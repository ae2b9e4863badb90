"""ELMo as a feature extractor: `hf-ctx embed` (hf_ctx.tools.embed), the word feature-extraction pipeline and
`ElmoModel.cache_token_embeddings`. The reference for every vector is `ElmoModel` run on one sentence alone."""

import json
import os

import h5py
import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import pipeline

from hf_ctx import (
    CtxBertConfig,
    CtxBertModel,
    ElmoConfig,
    ElmoForBiLM,
    ElmoModel,
    ElmoTokenizer,
    WordFeatureExtractionPipeline,
    modeling_elmo,
)
from hf_ctx.tools.cli import main
from hf_ctx.tools.embed import ElmoEmbedder, LayerOutput, read_sentences

SENTENCES = [
    "the cat sat on the mat .",
    "a dog",
    "Zürich 's mayor spoke",
    "the cat sat on the mat .",
    "ünïcödé wörds and a very-long-word-of-more-than-forty-eight-bytes-to-be-cut-somewhere-here",
    "x",
    "the dog and the cat and the bird and the fish all sat together on the long mat",
]


def tiny_elmo_config(**kwargs):
    # The published defaults clip cells and projections, so the LSTM runs its step-by-step path.
    return ElmoConfig(
        char_cnn={"filters": [[1, 4], [2, 8], [3, 8]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 16, "projection_dim": 8, "n_layers": 2},
        vocab_size=5,
        **kwargs,
    )


@pytest.fixture
def elmo_dir(tmp_path):
    """An ElmoForBiLM checkpoint with its tokenizer (the kind pretrain_elmo.py writes)."""
    folder = tmp_path / "elmo"
    ElmoForBiLM(tiny_elmo_config()).save_pretrained(folder)
    ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "the", "cat"]).save_pretrained(folder)
    return folder


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


def layers_alone(model: ElmoModel, sentence: str) -> np.ndarray:
    """ElmoModel's L + 1 layers for one sentence run alone: (L + 1, words, 2P)."""
    batch = ElmoTokenizer()(sentence.split(), is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        layers = model(**batch, output_hidden_states=True).hidden_states
    return torch.stack(layers)[:, 0].numpy()


def reference_model(elmo_dir) -> ElmoModel:
    return ElmoModel.from_pretrained(elmo_dir).eval()


# --- token-embedding cache ------------------------------------------------------------------------------------


def test_cache_gives_the_uncached_outputs_for_cached_and_unknown_words():
    model = ElmoModel(tiny_elmo_config()).eval()
    batch = ElmoTokenizer()(
        [s.split() for s in SENTENCES], is_split_into_words=True, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        expected = model(**batch, output_hidden_states=True).hidden_states
        assert model.cache_token_embeddings(["the", "cat", "dog", "mat", ".", "never-seen"]) == 8  # + <S>, </S>
        calls = []
        handle = model.char_cnn.register_forward_hook(lambda module, args, out: calls.append(args[0].shape[0]))
        cached = model(**batch, output_hidden_states=True).hidden_states
        handle.remove()
    for want, got in zip(expected, cached):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    # Only the out-of-vocabulary words went through the CNN: no cached word, boundary or padding position.
    in_vocabulary = {"the", "cat", "dog", "mat", "."}
    assert calls == [sum(word not in in_vocabulary for s in SENTENCES for word in s.split())]


def test_cache_checks_the_characters_behind_a_key(monkeypatch):
    """Every word gets the same key: the full character comparison must still pick the right rows or the CNN."""
    model = ElmoModel(tiny_elmo_config()).eval()
    batch = ElmoTokenizer()(["the cat", "cat dog"], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).last_hidden_state
        monkeypatch.setattr(modeling_elmo, "char_ids_key", lambda ids: torch.zeros(ids.shape[:-1], dtype=torch.long))
        assert model.cache_token_embeddings(["the", "cat", "dog"]) == 1  # one key: only the first word is kept
        torch.testing.assert_close(model(**batch).last_hidden_state, expected, atol=1e-6, rtol=0)


def test_cache_is_not_saved_and_follows_weight_changes(tmp_path):
    model = ElmoModel(tiny_elmo_config()).eval()
    batch = ElmoTokenizer()(["the cat sat", "a dog"], padding=True, return_tensors="pt")
    model.cache_token_embeddings(["the", "cat", "a", "dog"])
    model.save_pretrained(tmp_path)
    saved = load_file(tmp_path / "model.safetensors")
    assert not [name for name in saved if "token_cache" in name]
    assert ElmoModel.from_pretrained(tmp_path).token_cache_keys is None

    with torch.no_grad():
        model.char_cnn.convolutions[0].weight.mul_(2.0)  # in place: the cache must be recomputed
        changed = model(**batch).last_hidden_state
        model.clear_token_cache()
        torch.testing.assert_close(model(**batch).last_hidden_state, changed, atol=1e-6, rtol=0)
        model.cache_token_embeddings(["the", "cat"])
        model.load_state_dict(ElmoModel(tiny_elmo_config()).state_dict())  # new weights, loaded in place
        reloaded = model(**batch).last_hidden_state
        model.clear_token_cache()
        torch.testing.assert_close(model(**batch).last_hidden_state, reloaded, atol=1e-6, rtol=0)


def test_training_bypasses_the_cache():
    """With gradients wanted for the CNN, the CNN runs: its weights get gradients as without a cache."""
    model = ElmoForBiLM(tiny_elmo_config()).eval()  # eval: no dropout, so both runs are the same function
    batch = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "the", "cat"])(
        ["the cat", "cat"], padding=True, return_tensors="pt"
    )
    model(**batch).loss.backward()
    expected = model.elmo.char_cnn.convolutions[0].weight.grad.clone()
    model.zero_grad()
    model.elmo.cache_token_embeddings(["the", "cat"])
    model(**batch).loss.backward()
    torch.testing.assert_close(model.elmo.char_cnn.convolutions[0].weight.grad, expected)


# --- hf-ctx embed ---------------------------------------------------------------------------------------------


def test_embed_file_round_trip_matches_each_sentence_alone(elmo_dir, text_file, tmp_path):
    output = tmp_path / "vectors.hdf5"
    # batch_size 3: sentences of different lengths share batches (sorted by length), so padding is exercised.
    summary = ElmoEmbedder(elmo_dir, device="cpu").embed_file(text_file, output, batch_size=3, progress=False)
    assert summary == {
        "sentences": len(SENTENCES),
        "embedded": len(SENTENCES),
        "kept": 0,
        "words": sum(len(s.split()) for s in SENTENCES),
    }
    model = reference_model(elmo_dir)
    # Read as AllenNLP users do.
    with h5py.File(output, "r") as f:
        assert set(f.keys()) == {str(i) for i in range(len(SENTENCES))} | {"sentence_to_index"}
        sentence_to_index = json.loads(f["sentence_to_index"][0])
        for i, sentence in enumerate(SENTENCES):
            vectors = f[str(i)][...]
            assert vectors.dtype == np.float32 and vectors.shape == (3, len(sentence.split()), 16)
            np.testing.assert_allclose(vectors, layers_alone(model, sentence), atol=1e-6, rtol=0)
    # A repeated sentence maps to its last line, as in AllenNLP.
    assert sentence_to_index == {sentence: str(i) for i, sentence in enumerate(SENTENCES)}
    assert sentence_to_index["the cat sat on the mat ."] == "3"


@pytest.mark.parametrize("prefix", ["\ufeff", "\u200b", "\ufeff\u2060"], ids=["bom", "zero-width-space", "bom-joiner"])
def test_an_invisible_prefix_changes_no_vector_and_no_key(elmo_dir, text_file, tmp_path, prefix):
    """A byte-order mark (or a zero-width space) at the start of the input is not part of the first word."""
    marked = tmp_path / "marked.txt"
    # ... and a zero-width space at the start of the second line.
    marked.write_bytes(prefix.encode() + text_file.read_bytes().replace(b"\n", "\n\u200b".encode(), 1))
    embedder = ElmoEmbedder(elmo_dir, device="cpu")
    embedder.embed_file(text_file, tmp_path / "plain.hdf5", progress=False)
    embedder.embed_file(marked, tmp_path / "marked.hdf5", progress=False)
    with h5py.File(tmp_path / "plain.hdf5", "r") as plain, h5py.File(tmp_path / "marked.hdf5", "r") as f:
        assert json.loads(f["sentence_to_index"][0]) == json.loads(plain["sentence_to_index"][0])
        for i in range(len(SENTENCES)):
            np.testing.assert_array_equal(f[str(i)][...], plain[str(i)][...])


@pytest.mark.parametrize("output, weights", [("top", None), ("average", None), (None, [0.2, -0.5, 1.5])])
def test_embed_file_one_vector_per_word(elmo_dir, text_file, tmp_path, output, weights):
    path = tmp_path / "vectors.hdf5"
    ElmoEmbedder(elmo_dir, device="cpu").embed_file(
        text_file, path, output=output, scalar_mix_weights=weights, batch_size=4, progress=False
    )
    model = reference_model(elmo_dir)
    with h5py.File(path, "r") as f:
        for i, sentence in enumerate(SENTENCES):
            layers = layers_alone(model, sentence)
            expected = {"top": layers[-1], "average": layers.mean(0)}.get(output)
            if weights is not None:
                expected = sum(w * layer for w, layer in zip(weights, layers))
            np.testing.assert_allclose(f[str(i)][...], expected, atol=1e-6, rtol=0)


def test_embed_resumes_after_an_interruption(elmo_dir, text_file, tmp_path, monkeypatch):
    path = tmp_path / "vectors.hdf5"
    embedder = ElmoEmbedder(elmo_dir, device="cpu")
    real_embed_batch = ElmoEmbedder.embed_batch
    calls = []

    def interrupted(self, sentences, layer_output=None):
        calls.append(len(sentences))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_embed_batch(self, sentences, layer_output)

    monkeypatch.setattr(ElmoEmbedder, "embed_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        embedder.embed_file(text_file, path, batch_size=2, progress=False)
    with h5py.File(path, "r") as f:
        assert len([key for key in f if key.isdigit()]) == 2  # the first batch was written and kept
    monkeypatch.setattr(ElmoEmbedder, "embed_batch", real_embed_batch)
    summary = embedder.embed_file(text_file, path, batch_size=2, progress=False)
    assert (summary["kept"], summary["embedded"]) == (2, len(SENTENCES) - 2)
    model = reference_model(elmo_dir)
    with h5py.File(path, "r") as f:
        assert json.loads(f["sentence_to_index"][0])["a dog"] == "1"
        for i, sentence in enumerate(SENTENCES):
            np.testing.assert_allclose(f[str(i)][...], layers_alone(model, sentence), atol=1e-6, rtol=0)


def test_embed_extends_a_prefix_and_refuses_other_settings(elmo_dir, text_file, tmp_path):
    prefix = tmp_path / "prefix.txt"
    prefix.write_text("\n".join(SENTENCES[:3]) + "\n", encoding="utf-8")
    path = tmp_path / "vectors.hdf5"
    embedder = ElmoEmbedder(elmo_dir, device="cpu")
    embedder.embed_file(prefix, path, output="top", progress=False)
    with h5py.File(path, "r") as f:
        first = f["0"][...]
    assert embedder.embed_file(text_file, path, output="top", progress=False)["kept"] == 3
    with h5py.File(path, "r") as f:
        np.testing.assert_array_equal(f["0"][...], first)
        assert len(json.loads(f["sentence_to_index"][0])) == len(set(SENTENCES))

    with pytest.raises(ValueError, match=r"another output .*'top'.*'average'.*--overwrite"):
        embedder.embed_file(text_file, path, output="average", progress=False)
    other_model = ElmoEmbedder(ElmoModel(tiny_elmo_config()), device="cpu")
    with pytest.raises(ValueError, match="another model weights"):
        other_model.embed_file(text_file, path, output="top", progress=False)
    changed = tmp_path / "changed.txt"
    changed.write_text("a different first line\n" + "\n".join(SENTENCES[1:]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1 was 'the cat sat on the mat \.'.*'a different first line'"):
        embedder.embed_file(changed, path, output="top", progress=False)
    assert embedder.embed_file(changed, path, output="average", overwrite=True, progress=False)["kept"] == 0
    with h5py.File(path, "r") as f:
        assert (
            f.attrs["output"] == "average" and json.loads(f["sentence_to_index"][0])["a different first line"] == "0"
        )


def test_embed_refuses_files_it_did_not_write(elmo_dir, text_file, tmp_path):
    embedder = ElmoEmbedder(elmo_dir, device="cpu")
    foreign = tmp_path / "allennlp.hdf5"
    with h5py.File(foreign, "w") as f:
        f.create_dataset("0", data=np.zeros((3, 7, 16), dtype=np.float32))
    with pytest.raises(ValueError, match="not written by hf-ctx embed"):
        embedder.embed_file(text_file, foreign, progress=False)
    not_hdf5 = tmp_path / "notes.hdf5"
    not_hdf5.write_text("hello")
    with pytest.raises(ValueError, match="not a readable HDF5 file"):
        embedder.embed_file(text_file, not_hdf5, progress=False)


def test_bad_input_files_name_the_line(tmp_path):
    empty_lines = tmp_path / "empty.txt"
    empty_lines.write_text("one sentence\n\ntwo sentences\n   \nthree\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty\.txt: lines 2, 4 are empty"):
        read_sentences(empty_lines)
    not_utf8 = tmp_path / "latin1.txt"
    not_utf8.write_bytes("fine\ncaf\u00e9 au lait\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.txt:2: not valid UTF-8 \(.* at byte 3 of the line\)"):
        read_sentences(not_utf8)
    with pytest.raises(FileNotFoundError, match="missing.txt does not exist"):
        read_sentences(tmp_path / "missing.txt")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        read_sentences(tmp_path)
    (tmp_path / "nothing.txt").write_text("")
    with pytest.raises(ValueError, match="is empty: no sentences"):
        read_sentences(tmp_path / "nothing.txt")
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"a b\r\nc\r\n")
    assert read_sentences(crlf) == ["a b", "c"]


def test_embed_refuses_models_that_are_not_elmo(tmp_path):
    bert = tmp_path / "bert"
    CtxBertModel(CtxBertConfig.from_preset("tiny", vocab_size=50)).save_pretrained(bert)
    with pytest.raises(ValueError, match="holds a 'hf_ctx_bert' model, not an ELMo"):
        ElmoEmbedder(bert)
    with pytest.raises(ValueError, match="has no config.json"):
        ElmoEmbedder(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ElmoEmbedder(tmp_path / "no" / "such" / "model")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            ElmoEmbedder(ElmoModel(tiny_elmo_config()), device="cuda")
    with pytest.raises(ValueError, match="dtype must be one of"):
        ElmoEmbedder(ElmoModel(tiny_elmo_config()), dtype="float64")
    with pytest.raises(ValueError, match="3 layers"):
        LayerOutput(3, scalar_mix_weights=[0.5, 0.5])
    with pytest.raises(
        ValueError, match=r"^scalar_mix_weights must be a list of finite numbers, one per layer, got \[nan, "
    ):
        LayerOutput(3, scalar_mix_weights=[float("nan"), 0.0, 1.0])
    with pytest.raises(ValueError, match="output must be one of"):
        LayerOutput(3, "bottom")


def test_cli_embed_takes_negative_weights_as_written_and_no_progress_hides_every_bar(
    elmo_dir, text_file, tmp_path, capsys
):
    """`--scalar_mix_weights -1,0.5,2` is the option's value (before: "expected one argument", argparse reading it
    as an option); `--no_progress` hides transformers' bar while the weights load (before: "Loading weights")."""
    from transformers.utils import logging as transformers_logging

    output = tmp_path / "vectors.hdf5"
    shown = transformers_logging.is_progress_bar_enabled()  # an example script run before in this process hides it
    transformers_logging.enable_progress_bar()
    try:
        argv = [str(elmo_dir), str(text_file), str(output), "--scalar_mix_weights", "-1,0.5,2", "--no_progress"]
        main(["embed", *argv])
        captured = capsys.readouterr()
        assert "Loading weights" not in captured.err and "it/s" not in captured.err, captured.err
        assert transformers_logging.is_progress_bar_enabled()  # this process's own setting, as it was
    finally:
        if not shown:
            transformers_logging.disable_progress_bar()
    model = reference_model(elmo_dir)
    with h5py.File(output, "r") as f:
        assert f.attrs["output"] == "scalar_mix -1.0,0.5,2.0"
        expected = np.tensordot([-1, 0.5, 2], layers_alone(model, SENTENCES[0]), axes=1)
        np.testing.assert_allclose(f["0"][...], expected, atol=1e-5, rtol=0)


def test_cli_embed_with_vocab_file_and_overwrite(elmo_dir, text_file, tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("the\ncat\ndog\nmat\n.\n", encoding="utf-8")
    output = tmp_path / "vectors.hdf5"
    main(
        [
            "embed",
            str(elmo_dir),
            str(text_file),
            str(output),
            "--scalar_mix_weights",
            "0.2,0.3,0.5",
            "--vocab_file",
            str(vocab),
            "--batch_size",
            "2",
            "--device",
            "cpu",
            "--no_progress",
        ]
    )
    captured = capsys.readouterr()
    assert "cached the token layer of 7 words" in captured.err
    assert f"wrote {len(SENTENCES)} sentences" in captured.out
    model = reference_model(elmo_dir)
    with h5py.File(output, "r") as f:
        assert f.attrs["output"] == "scalar_mix 0.2,0.3,0.5"
        for i, sentence in enumerate(SENTENCES):
            expected = np.tensordot([0.2, 0.3, 0.5], layers_alone(model, sentence), axes=1)
            np.testing.assert_allclose(f[str(i)][...], expected, atol=1e-6, rtol=0)
    main(["embed", str(elmo_dir), str(text_file), str(output), "--top", "--overwrite", "--no_progress"])
    with h5py.File(output, "r") as f:
        assert f.attrs["output"] == "top" and f["0"].shape == (7, 16)
    with pytest.raises(SystemExit) as exit_info:  # a user error: one line on stderr, status 1
        main(["embed", str(elmo_dir), str(text_file), str(output), "--scalar_mix_weights", "0.2;0.8"])
    assert exit_info.value.code == 1
    assert "--scalar_mix_weights must be comma-separated numbers such as 0.2,0.3,0.5, got '0.2;0.8'" in (
        capsys.readouterr().err
    )


# --- pipeline("feature-extraction") ---------------------------------------------------------------------------


def test_feature_extraction_pipeline_gives_a_vector_per_word(elmo_dir):
    model = reference_model(elmo_dir)
    extractor = pipeline("feature-extraction", model=str(elmo_dir), pipeline_class=WordFeatureExtractionPipeline)
    sentence = "  Zürich 's   mayor spoke"
    result = extractor(sentence)
    assert [(r["word"], r["start"], r["end"]) for r in result] == [
        ("Zürich", 2, 8),
        ("'s", 9, 11),
        ("mayor", 14, 19),
        ("spoke", 20, 25),
    ]
    assert all(sentence[r["start"] : r["end"]] == r["word"] for r in result)
    layers = layers_alone(model, sentence)
    np.testing.assert_allclose(np.array([r["vector"] for r in result]), layers[-1], atol=1e-6, rtol=0)

    words = extractor(["a", "dog"], is_split_into_words=True)
    assert [(r["word"], r["start"], r["end"]) for r in words] == [("a", 0, 1), ("dog", 2, 5)]
    assert len(extractor(["a dog", "x"])) == 2 and extractor("") == []
    # Raw text is split as CoNLL data is: punctuation off words, offsets into the text.
    punctuated = extractor("He flew to Zürich.")
    assert [(r["word"], r["start"], r["end"]) for r in punctuated][-2:] == [("Zürich", 11, 17), (".", 17, 18)]

    mixed = pipeline(
        "feature-extraction",
        model=str(elmo_dir),
        pipeline_class=WordFeatureExtractionPipeline,
        scalar_mix_weights=[0.2, 0.3, 0.5],
        return_tensors=True,
    )
    vectors = torch.stack([r["vector"] for r in mixed(sentence)]).numpy()
    np.testing.assert_allclose(vectors, np.tensordot([0.2, 0.3, 0.5], layers, axes=1), atol=1e-6, rtol=0)
    every_layer = extractor(sentence, output="all", return_tensors=True)
    assert every_layer[0]["vector"].shape == (3, 16)
    np.testing.assert_allclose(every_layer[1]["vector"].numpy(), layers[:, 1], atol=1e-6, rtol=0)


# The n-th write into new space fails; `kept`: the sentences of the batches flushed before (2 per batch).
@pytest.mark.parametrize("failing_write, kept", [(1, 0), (5, 0), (9, 2), (11, 4), (13, 6), (14, 7), (1000, 7)])
def test_embed_on_a_full_disk_keeps_finished_work_and_resumes(
    elmo_dir, text_file, tmp_path, monkeypatch, failing_write, kept
):
    """A disk that fills up at the n-th write: a one-line OSError, no crash; the rerun resumes and completes the
    file as an uninterrupted run would, keeping what was flushed before (1000: nothing fails)."""
    import errno

    from hf_ctx import atomic_files

    path = tmp_path / "vectors.hdf5"
    embedder = ElmoEmbedder(elmo_dir, device="cpu")
    real_pwrite, calls = os.pwrite, []

    def pwrite(fd, data, offset):
        if offset + len(data) <= os.fstat(fd).st_size:  # overwriting allocated space needs no new space
            return real_pwrite(fd, data, offset)
        calls.append(offset)
        if len(calls) == failing_write:
            real_pwrite(fd, data[: len(data) // 2], offset)  # part of it lands, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(atomic_files.os, "pwrite", pwrite)
    try:
        embedder.embed_file(text_file, path, batch_size=2, progress=False)
    except OSError as error:
        assert "No space left on device" in str(error) and "run the same command again" in str(error)
        assert failing_write < 1000
    monkeypatch.undo()
    summary = embedder.embed_file(text_file, path, batch_size=2, progress=False)
    assert summary["kept"] + summary["embedded"] == len(SENTENCES)
    assert summary["kept"] == kept
    model = reference_model(elmo_dir)
    with h5py.File(path, "r") as f:
        assert json.loads(f["sentence_to_index"][0])["a dog"] == "1"
        for i, sentence in enumerate(SENTENCES):
            np.testing.assert_allclose(f[str(i)][...], layers_alone(model, sentence), atol=1e-6, rtol=0)


def test_embed_names_a_file_damaged_by_an_io_error_while_overwriting(elmo_dir, text_file, tmp_path, monkeypatch):
    """An error while overwriting space the file already has (not a full disk) says what to delete."""
    import errno

    from hf_ctx import atomic_files

    real_pwrite, superblock_writes = os.pwrite, []

    def pwrite(fd, data, offset):
        # The superblock (offset 0) is rewritten in place at every flush after the first.
        if offset == 0:
            superblock_writes.append(offset)
            if len(superblock_writes) == 2:
                raise OSError(errno.EIO, "Input/output error")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(atomic_files.os, "pwrite", pwrite)
    with pytest.raises(OSError, match=r"Input/output error\); the file may be damaged: delete it, or .*--overwrite"):
        ElmoEmbedder(elmo_dir, device="cpu").embed_file(text_file, tmp_path / "v.hdf5", progress=False)


def test_cli_embed_on_a_full_disk_prints_one_line(elmo_dir, text_file, tmp_path, monkeypatch, capsys):
    import errno

    from hf_ctx import atomic_files

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "pwrite", full)
    with pytest.raises(SystemExit) as exit_info:
        main(["embed", str(elmo_dir), str(text_file), str(tmp_path / "v.hdf5"), "--device", "cpu", "--no_progress"])
    assert exit_info.value.code == 1
    error = [line for line in capsys.readouterr().err.splitlines() if line.strip() and not line.startswith("Loading")]
    assert len(error) == 1 and error[0].startswith("error: writing") and "No space left" in error[0]


def test_cli_embed_names_an_unknown_model_type(tmp_path, text_file, capsys):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(
        json.dumps({"model_type": "elmo_v9", "auto_map": {"AutoConfig": "configuration_elmo_v9.Config"}})
    )
    with pytest.raises(SystemExit):
        main(["embed", str(tmp_path / "model"), str(text_file), str(tmp_path / "v.hdf5"), "--device", "cpu"])
    assert "has model_type 'elmo_v9', which neither hf_ctx" in capsys.readouterr().err


def test_cli_embed_splits_raw_text_as_conll_unless_pretokenized(elmo_dir, tmp_path, capsys):
    """`hf-ctx embed` reads raw text: punctuation comes off words as in CoNLL (the words a biLM pretrained by
    hf_ctx learnt from); `--pretokenized` keeps the text's own spaces; a file is only extended alike."""
    raw = tmp_path / "raw.txt"
    raw.write_text("Peter flew to Brussels.\nIt's over, isn't it?\n", encoding="utf-8")
    model = reference_model(elmo_dir)
    split = tmp_path / "split.hdf5"
    main(["embed", str(elmo_dir), str(raw), str(split), "--device", "cpu", "--no_progress"])
    spaced = tmp_path / "spaced.hdf5"
    main(["embed", str(elmo_dir), str(raw), str(spaced), "--pretokenized", "--device", "cpu", "--no_progress"])
    with h5py.File(split, "r") as f, h5py.File(spaced, "r") as g:
        assert f["0"].shape[1] == 5 and f["1"].shape[1] == 8  # Peter flew to Brussels . / It 's over , is n't it ?
        assert g["0"].shape[1] == 4 and g["1"].shape[1] == 4
        np.testing.assert_allclose(f["0"][...], layers_alone(model, "Peter flew to Brussels ."), atol=1e-6, rtol=0)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["embed", str(elmo_dir), str(raw), str(split), "--pretokenized", "--device", "cpu", "--no_progress"])
    assert (
        "another word splitter (--pretokenized or not) ('treebank', this run: 'whitespace')" in capsys.readouterr().err
    )


@pytest.mark.parametrize("inside", ["config.json", "new.hdf5"])
def test_cli_embed_refuses_an_output_inside_the_model_folder(elmo_dir, text_file, capsys, inside):
    output = elmo_dir / inside
    before = output.read_bytes() if output.exists() else None
    with pytest.raises(SystemExit) as raised:
        main(["embed", str(elmo_dir), str(text_file), str(output), "--overwrite", "--device", "cpu", "--no_progress"])
    assert raised.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "inside the model folder" in err
    assert (output.read_bytes() if output.exists() else None) == before


@pytest.mark.parametrize("given", ["folder", "model"])
def test_embed_file_refuses_an_output_inside_the_model_folder(elmo_dir, text_file, given):
    """From Python too, whether the embedder got the folder or a model loaded from it (its `name_or_path`)."""
    model = elmo_dir if given == "folder" else ElmoModel.from_pretrained(elmo_dir)
    embedder = ElmoEmbedder(model, device="cpu")
    before = (elmo_dir / "config.json").read_bytes()
    with pytest.raises(ValueError, match="inside the model folder"):
        embedder.embed_file(text_file, elmo_dir / "config.json", overwrite=True, progress=False)
    with pytest.raises(ValueError, match="inside the model folder"):
        embedder.embed_file(text_file, elmo_dir / "new.hdf5", progress=False)
    assert (elmo_dir / "config.json").read_bytes() == before and not (elmo_dir / "new.hdf5").exists()
    with pytest.raises(ValueError, match="is the input file"):
        embedder.embed_file(text_file, text_file, overwrite=True, progress=False)


def test_cli_embed_refuses_the_vocab_file_as_output(elmo_dir, text_file, tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("the\ncat\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["embed", str(elmo_dir), str(text_file), str(vocab), "--vocab_file", str(vocab), "--overwrite"])
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is the input file" in err
    assert vocab.read_text(encoding="utf-8") == "the\ncat\n"


def test_cli_embed_overwrite_interrupted_says_the_old_file_was_kept(
    elmo_dir, text_file, tmp_path, monkeypatch, capsys
):
    output = tmp_path / "vectors.hdf5"
    main(["embed", str(elmo_dir), str(text_file), str(output), "--device", "cpu", "--no_progress"])
    before = output.read_bytes()

    def interrupted(self, sentences, layer_output=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(ElmoEmbedder, "embed_batch", interrupted)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(
            [
                "embed",
                str(elmo_dir),
                str(text_file),
                str(output),
                "--overwrite",
                "--top",
                "--device",
                "cpu",
                "--no_progress",
            ]
        )
    err = capsys.readouterr().err
    assert "as it was before this run" in err and "without --overwrite" not in err
    assert output.read_bytes() == before
