"""The bilm-tf weights converter: a weights.hdf5 written here with known random weights, in the layout bilm-tf's
`dump_weights` writes, must give (after conversion and loading with the Auto classes) the vectors that the
original TensorFlow graph computes. The original's math is written out below in plain numpy, from bilm-tf's
`BidirectionalLanguageModelGraph`: Batcher character ids with <S>/</S>, conv2d + max-pool + activation, highway
`carry * relu(x W_transform + b) + (1 - carry) * x`, projection, TensorFlow `LSTMCell` (gates i, j, f, o from
`[x ; h] @ W_0 + B`, forget bias 1, cell clip, projection `W_P_0`, projection clip), `ResidualWrapper` from the
second layer, `reverse_sequence` for the backward LM, then the boundaries removed."""

import json

import h5py
import numpy as np
import pytest
import torch
from huggingface_hub import ModelCard
from transformers import AutoModel, AutoTokenizer

import hf_ctx  # noqa: F401  (registers the Auto classes)
from hf_ctx import ElmoModel, ElmoTokenizer
from hf_ctx.tools.cli import main as cli_main
from hf_ctx.tools.convert_elmo import convert_elmo_checkpoint

SENTENCES = [["The", "biLM", "reads", "characters", "."], ["Zürich"], [], ["a" * 60, "b"]]


def options_for(projected: bool) -> dict:
    filters = [[1, 4], [2, 4], [3, 8]]  # 16 filters
    return {
        "bidirectional": True,
        "char_cnn": {
            "activation": "relu",
            "embedding": {"dim": 4},
            "filters": filters,
            "max_characters_per_token": 50,
            "n_characters": 262,
            "n_highway": 2,
        },
        "lstm": {
            "cell_clip": 1.0,
            "dim": 12 if projected else 16,
            "n_layers": 2,
            "proj_clip": 0.7,
            "projection_dim": 6 if projected else 16,
            "use_skip_connections": True,
        },
        "dropout": 0.1,
    }


def write_weights(path, options, rng) -> dict:
    """A weights.hdf5 in bilm-tf's layout with random weights; returns them."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    dim, n_filters = cnn["embedding"]["dim"], sum(n for _, n in cnn["filters"])
    proj, cell = lstm["projection_dim"], lstm["dim"]
    weights = {"char_embed": rng.uniform(-1, 1, (261, dim))}
    for i, (width, count) in enumerate(cnn["filters"]):
        weights[f"CNN/W_cnn_{i}"] = rng.uniform(-0.5, 0.5, (1, width, dim, count))
        weights[f"CNN/b_cnn_{i}"] = rng.uniform(-0.5, 0.5, count)
    for k in range(cnn["n_highway"]):
        for name, shape in [
            ("W_carry", (n_filters, n_filters)),
            ("b_carry", (n_filters,)),
            ("W_transform", (n_filters, n_filters)),
            ("b_transform", (n_filters,)),
        ]:
            weights[f"CNN_high_{k}/{name}"] = rng.normal(0, 0.4, shape)
    if n_filters != proj:
        weights["CNN_proj/W_proj"] = rng.normal(0, 0.5, (n_filters, proj))
        weights["CNN_proj/b_proj"] = rng.normal(0, 0.5, proj)
    for d in range(2):
        for k in range(lstm["n_layers"]):
            root = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            weights[f"{root}/W_0"] = rng.normal(0, 0.6, (proj + proj, 4 * cell))  # large enough to hit the clips
            weights[f"{root}/B"] = rng.normal(0, 0.5, 4 * cell)
            if proj < cell:
                weights[f"{root}/W_P_0"] = rng.normal(0, 0.6, (cell, proj))
    with h5py.File(path, "w") as f:
        for name, value in weights.items():
            f.create_dataset(name, data=value.astype(np.float32))
    return {name: value.astype(np.float32).astype(np.float64) for name, value in weights.items()}


# --- the original computation, in numpy ------------------------------------------------------------------


def batcher_char_ids(sentence):
    """bilm-tf's Batcher.batch_sentences for one sentence: <S>, the words, </S>, each 50 ids, +1."""

    def encode(word):
        if word in ("<S>", "</S>"):
            code = [258, 256 if word == "<S>" else 257, 259]
        else:
            code = [258, *word.encode("utf-8", "ignore")[:48], 259]
        return [c + 1 for c in code + [260] * (50 - len(code))]

    return np.array([encode(w) for w in ["<S>", *sentence, "</S>"]])


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def tf_token_embeddings(ids, w, options):
    cnn = options["char_cnn"]
    table = np.concatenate([np.zeros((1, w["char_embed"].shape[1])), w["char_embed"]])  # padding row added
    chars = table[ids]  # (tokens, 50, dim)
    features = []
    for i, (width, _count) in enumerate(cnn["filters"]):
        kernel, bias = w[f"CNN/W_cnn_{i}"][0], w[f"CNN/b_cnn_{i}"]  # (width, dim, count)
        conv = np.stack([np.einsum("twd,wdc->tc", chars[:, s : s + width], kernel) for s in range(50 - width + 1)], 1)
        features.append(np.maximum((conv + bias).max(axis=1), 0))  # max-pool, then relu
    x = np.concatenate(features, axis=1)
    for k in range(cnn["n_highway"]):
        g = f"CNN_high_{k}"
        carry = sigmoid(x @ w[f"{g}/W_carry"] + w[f"{g}/b_carry"])
        transform = np.maximum(x @ w[f"{g}/W_transform"] + w[f"{g}/b_transform"], 0)
        x = carry * transform + (1 - carry) * x
    if "CNN_proj/W_proj" in w:
        x = x @ w["CNN_proj/W_proj"] + w["CNN_proj/b_proj"]
    return x


def tf_lstm_cell_layer(x, w, root, lstm):
    """tf.nn.dynamic_rnn over TensorFlow's LSTMCell(dim, num_proj, cell_clip, proj_clip) from zero state."""
    cell = lstm["dim"]
    kernel, bias = w[f"{root}/W_0"], w[f"{root}/B"]
    m, c = np.zeros(lstm["projection_dim"]), np.zeros(cell)
    outputs = []
    for x_t in x:
        z = np.concatenate([x_t, m]) @ kernel + bias
        i, j, f, o = (z[k * cell : (k + 1) * cell] for k in range(4))
        c = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j)
        c = np.clip(c, -lstm["cell_clip"], lstm["cell_clip"])
        m = sigmoid(o) * np.tanh(c)
        if f"{root}/W_P_0" in w:
            m = np.clip(m @ w[f"{root}/W_P_0"], -lstm["proj_clip"], lstm["proj_clip"])
        outputs.append(m)
    return np.stack(outputs)


def tf_elmo_layers(sentence, w, options):
    """bilm-tf's lm_embeddings for one sentence: (3, words, 2 * projection_dim)."""
    lstm = options["lstm"]
    tokens = tf_token_embeddings(batcher_char_ids(sentence), w, options)
    layers = [np.concatenate([tokens, tokens], axis=1)]
    per_direction = []
    for d, layer_input in enumerate([tokens, tokens[::-1]]):  # reverse_sequence for the backward LM
        outputs = []
        for k in range(lstm["n_layers"]):
            output = tf_lstm_cell_layer(layer_input, w, f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell", lstm)
            if k > 0:
                output = output + layer_input  # ResidualWrapper
            outputs.append(output if d == 0 else output[::-1])
            layer_input = output
        per_direction.append(outputs)
    layers += [np.concatenate([f, b], axis=1) for f, b in zip(*per_direction)]
    return np.stack([layer[1:-1] for layer in layers])  # <S> and </S> removed


@pytest.mark.parametrize("projected", [True, False])
def test_converted_model_gives_the_original_vectors(tmp_path, projected):
    rng = np.random.default_rng(0)
    options = options_for(projected)
    (tmp_path / "options.json").write_text(json.dumps(options))
    weights = write_weights(tmp_path / "weights.hdf5", options, rng)
    convert_elmo_checkpoint(tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "converted")

    model = AutoModel.from_pretrained(tmp_path / "converted")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "converted")
    assert isinstance(model, ElmoModel) and isinstance(tokenizer, ElmoTokenizer)
    batch = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        layers = model(**batch, output_hidden_states=True).hidden_states
    clipped = False
    for i, sentence in enumerate(SENTENCES):
        expected = tf_elmo_layers(sentence, weights, options)
        for k, layer in enumerate(layers):
            np.testing.assert_allclose(layer[i, : len(sentence)].double().numpy(), expected[k], atol=1e-5, rtol=0)
            assert (layer[i, len(sentence) :] == 0).all()
        clipped |= bool(np.isclose(np.abs(expected[1:]), options["lstm"]["proj_clip"]).any())
    assert clipped or not projected  # the weights are large enough that clipping matters


def test_command_line_and_word_vocabulary(tmp_path):
    options = options_for(True)
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(1))
    (tmp_path / "vocab.txt").write_text("</S>\n<S>\n<UNK>\nthe\ncat\n")
    out = tmp_path / "out"
    cli_main(
        [
            "convert-elmo",
            str(tmp_path / "options.json"),
            str(tmp_path / "weights.hdf5"),
            str(out),
            "--vocab_file",
            str(tmp_path / "vocab.txt"),
        ]
    )
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer("the cat dog")["input_word_ids"] == [3, 4, 2]
    model = AutoModel.from_pretrained(out)
    assert (model.config.vocab_size, model.config.bos_token_id, model.config.eos_token_id) == (5, 1, 0)
    direct = convert_elmo_checkpoint(tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "again")
    for (name, a), b in zip(model.state_dict().items(), direct.state_dict().values()):
        assert torch.equal(a, b), name
    # The folder's card names the files it came from (never their local paths) and the converter.
    card = ModelCard.load(out / "README.md")
    origin = "converted by `hf-ctx convert-elmo` from the bilm-tf files `options.json`, `weights.hdf5`, `vocab.txt`"
    assert card.data.hf_ctx_origin == origin and card.data.base_model is None
    assert "`ElmoModel` converted by `hf-ctx convert-elmo`" in card.text and str(tmp_path) not in str(card)


def test_files_that_do_not_fit_are_clear_errors(tmp_path):
    options = options_for(True)
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(2))
    with h5py.File(tmp_path / "weights.hdf5", "a") as f:
        del f["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B"]
    with pytest.raises(ValueError, match="no dataset 'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B'"):
        convert_elmo_checkpoint(tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "out")
    options["lstm"]["dim"] = 10
    (tmp_path / "options.json").write_text(json.dumps(options))
    with pytest.raises(ValueError, match=r"W_0 has shape \(12, 48\), expected \(12, 40\)"):
        convert_elmo_checkpoint(tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "out")
    options["lstm"]["dim"], options["char_cnn"]["n_characters"] = 16, 10  # before: replaced by 262 in silence
    (tmp_path / "options.json").write_text(json.dumps(options))
    with pytest.raises(ValueError, match=r"options\.json: char_cnn.n_characters is 10; bilm-tf's character encoding"):
        convert_elmo_checkpoint(tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "out")
    (tmp_path / "options.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"options\.json: not JSON .*expected bilm-tf.s JSON options file"):
        convert_elmo_checkpoint(tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "out")


def test_swapped_or_wrong_files_say_which_argument_is_which(tmp_path):
    options = options_for(True)
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(3))
    (tmp_path / "notes.txt").write_text("not an hdf5 file")
    options, weights, out = tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "out"
    with pytest.raises(
        ValueError,
        match=rf"swapped: .*OPTIONS_JSON, first\) must be the JSON file {options}.*"
        rf"WEIGHTS_HDF5, second\) the HDF5 file {weights}",
    ):
        convert_elmo_checkpoint(weights, options, out)
    with pytest.raises(ValueError, match=rf"OPTIONS_JSON .* but {weights} is an HDF5 file"):
        convert_elmo_checkpoint(weights, weights, out)
    with pytest.raises(ValueError, match=rf"WEIGHTS_HDF5 .* but {tmp_path / 'notes.txt'} is not an HDF5 file$"):
        convert_elmo_checkpoint(options, tmp_path / "notes.txt", out)
    with pytest.raises(ValueError, match=r"not an HDF5 file \(it is JSON: the options\?\)"):
        convert_elmo_checkpoint(options, options, out)
    assert not out.exists()


def _cli_error(capsys, *args) -> str:
    """Run `hf-ctx convert-elmo ARGS`: it must fail with one line `error: ...` and exit status 1."""
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["convert-elmo", *map(str, args)])
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize(
    "remove, key",
    [
        (("lstm",), "lstm"),
        (("char_cnn", "embedding"), "char_cnn.embedding"),
        (("char_cnn", "max_characters_per_token"), "char_cnn.max_characters_per_token"),
        (("lstm", "projection_dim"), "lstm.projection_dim"),
    ],
)
def test_options_missing_a_key_is_one_line_naming_file_and_key(tmp_path, capsys, remove, key):
    options = options_for(True)
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(3))
    section = options
    for name in remove[:-1]:
        section = section[name]
    del section[remove[-1]]
    (tmp_path / "options.json").write_text(json.dumps(options))
    line = _cli_error(capsys, tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "out")
    assert f"{tmp_path / 'options.json'} has no '{key}'" in line
    assert not (tmp_path / "out").exists()


def test_a_group_where_a_dataset_should_be_is_one_line(tmp_path, capsys):
    options = options_for(True)
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(4))
    with h5py.File(tmp_path / "weights.hdf5", "a") as f:
        del f["CNN/b_cnn_1"]
        f.create_group("CNN/b_cnn_1")
    line = _cli_error(capsys, tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "out")
    assert f"{tmp_path / 'weights.hdf5'}: CNN/b_cnn_1 is an HDF5 group, not a dataset" in line


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_infinite_weights_are_refused_naming_the_tensor(tmp_path, capsys, bad):
    options = options_for(True)
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(5))
    with h5py.File(tmp_path / "weights.hdf5", "a") as f:
        f["CNN_high_1/W_carry"][3, 2] = bad
    line = _cli_error(capsys, tmp_path / "options.json", tmp_path / "weights.hdf5", tmp_path / "out")
    assert "the weights char_cnn.highway.layers.1.weight hold 1 NaN or infinite value(s)" in line
    assert not (tmp_path / "out").exists()


def test_converting_into_a_folder_holding_another_model_is_refused(tmp_path, capsys):
    options = options_for(True)
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(6))
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text('{"model_type": "hf_ctx_bert"}')
    (out / "tokenizer_config.json").write_text("{}")
    line = _cli_error(capsys, tmp_path / "options.json", tmp_path / "weights.hdf5", out)
    assert f"output folder {out} already holds a checkpoint (config.json, tokenizer_config.json)" in line
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "tokenizer_config.json"]
