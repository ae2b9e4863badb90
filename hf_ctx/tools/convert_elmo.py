"""Convert the published ELMo weights (bilm-tf's options.json + weights.hdf5, the files AllenNLP reads) into an
hf_ctx checkpoint that `AutoModel` and `AutoTokenizer` load.

The weights file holds what bilm-tf's `dump_weights` writes (the language-model softmax is not in it):

    char_embed                                      (261, E)  character embeddings, without the padding row
    CNN/W_cnn_{i}, CNN/b_cnn_{i}                    (1, width, E, count), (count,)
    CNN_high_{k}/W_carry, b_carry                   (F, F), (F,)   highway gate g = sigmoid(x W_carry + b_carry)
    CNN_high_{k}/W_transform, b_transform           (F, F), (F,)   y = g * relu(x W_transform + b) + (1 - g) * x
    CNN_proj/W_proj, b_proj                         (F, P), (P,)   only when F != P
    RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell/W_0   (input + P, 4H)  [x ; h] -> gates in the order i, j, f, o
    RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell/B     (4H,)            TensorFlow adds 1 to the forget gate
    RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell/W_P_0 (H, P)          only when P < H

with d = 0 the forward and d = 1 the backward LM. TensorFlow multiplies `x @ W`, PyTorch `W @ x`, so matrices are
transposed; gates are reordered to PyTorch's (input, forget, cell, output) and the forget bias of 1 is added
to the stored bias.
"""

import logging
from pathlib import Path

import numpy as np
import torch

from ..configuration_elmo import N_CHARACTERS, ElmoConfig
from ..data.files import read_json_file
from ..modeling_elmo import ElmoModel
from ..remote_code import check_finite_weights
from ..tokenization_elmo import ElmoTokenizer
from .model_card import save_converted_checkpoint
from .paths import check_no_checkpoint_in, check_output_dir

logger = logging.getLogger(__name__)

# TensorFlow's LSTMCell adds this to the forget gate when it runs.
TF_FORGET_BIAS = 1.0


def _section(options: dict, name: str, source: str) -> dict:
    """`options[name]`, which must be a JSON object; errors name the file and the key."""
    if not isinstance(options, dict):
        raise ValueError(f"{source}: {name.rsplit('.', 1)[0]} must be a JSON object, got {options!r}")
    key = name.rsplit(".", 1)[-1]
    if key not in options:
        raise ValueError(f"{source} has no {name!r}: not a bilm-tf options file, or an incomplete one")
    if not isinstance(options[key], dict):
        raise ValueError(f"{source}: {name} must be a JSON object, got {options[key]!r}")
    return options[key]


def _value(section: dict, name: str, source: str):
    """`section[key]` for the dotted `name` ("lstm.dim"); a missing key is an error naming the file and the key."""
    key = name.rsplit(".", 1)[-1]
    if key not in section:
        raise ValueError(f"{source} has no {name!r}: not a bilm-tf options file, or an incomplete one")
    return section[key]


def elmo_config_from_options(options: dict, source: str = "options.json") -> ElmoConfig:
    """An `ElmoConfig` with the architecture an options.json describes; a `ValueError` naming `source` (the
    file) and the key that is missing or wrong."""
    if not isinstance(options, dict):
        raise ValueError(f"{source} must hold a JSON object, got {type(options).__name__}")
    if "char_cnn" not in options:
        raise ValueError(f"{source} has no char_cnn section: only character-input ELMo models can be converted")
    if options.get("bidirectional") is False:
        raise ValueError(f"{source} describes a one-directional language model; ELMo is bidirectional")
    cnn, lstm = _section(options, "char_cnn", source), _section(options, "lstm", source)
    filters = _value(cnn, "char_cnn.filters", source)
    if not isinstance(filters, list) or not all(isinstance(f, list) and len(f) == 2 for f in filters):
        raise ValueError(f"{source}: char_cnn.filters must be a list of [width, count] pairs, got {filters!r}")
    given_characters = cnn.get("n_characters", N_CHARACTERS - 1)
    if given_characters not in (N_CHARACTERS - 1, N_CHARACTERS):  # before: replaced by 262 in silence
        raise ValueError(
            f"{source}: char_cnn.n_characters is {given_characters!r}; bilm-tf's character encoding has "
            f"{N_CHARACTERS - 1} ids ({N_CHARACTERS} with the padding id), the only one ELMo's weights read"
        )
    char_cnn = {
        "activation": _value(cnn, "char_cnn.activation", source),
        "embedding": {"dim": _value(_section(cnn, "char_cnn.embedding", source), "char_cnn.embedding.dim", source)},
        "filters": [list(f) for f in filters],
        "max_characters_per_token": _value(cnn, "char_cnn.max_characters_per_token", source),
        # Training options say 261 characters; the converted model adds the padding id 0.
        "n_characters": N_CHARACTERS,
        "n_highway": cnn.get("n_highway") or 0,
    }
    lstm_section = {
        "dim": _value(lstm, "lstm.dim", source),
        "projection_dim": _value(lstm, "lstm.projection_dim", source),
        "n_layers": lstm.get("n_layers", 1),
        "cell_clip": lstm.get("cell_clip"),
        "proj_clip": lstm.get("proj_clip"),
        "use_skip_connections": bool(lstm.get("use_skip_connections")),
    }
    try:
        return ElmoConfig(char_cnn=char_cnn, lstm=lstm_section, dropout=options.get("dropout", 0.1))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{source}: {error}") from None


class _WeightsFile:
    """Reads datasets from an open h5py file, with errors that name the file, the dataset and the shapes."""

    def __init__(self, h5file, path):
        self.file, self.path = h5file, path

    def __call__(self, name: str, shape: tuple) -> np.ndarray:
        import h5py

        if name not in self.file:
            raise ValueError(f"{self.path} has no dataset {name!r}: not an ELMo weights file for these options")
        if not isinstance(self.file[name], h5py.Dataset):
            raise ValueError(
                f"{self.path}: {name} is an HDF5 {type(self.file[name]).__name__.lower()}, not a dataset of weights: "
                "not an ELMo weights file for these options"
            )
        value = self.file[name][...]
        if tuple(value.shape) != tuple(shape):
            raise ValueError(
                f"{self.path}: {name} has shape {tuple(value.shape)}, expected {tuple(shape)} from the options file"
            )
        return value.astype(np.float32)


def _tf_gates_to_torch(tf_rows: np.ndarray, cell_size: int) -> np.ndarray:
    """Reorder the 4H gate rows from TensorFlow's (i, j, f, o) to PyTorch's (i, f, j, o)."""
    i, j, f, o = (tf_rows[k * cell_size : (k + 1) * cell_size] for k in range(4))
    return np.concatenate([i, f, j, o])


def bilm_tf_state_dict(config: ElmoConfig, weights_hdf5) -> dict[str, torch.Tensor]:
    """The `ElmoModel` state dict held by a bilm-tf weights file (see the module docstring for the layout)."""
    import h5py

    cnn, lstm = config.char_cnn, config.lstm
    embedding_dim, projection_dim, cell_size = cnn["embedding"]["dim"], lstm["projection_dim"], lstm["dim"]
    n_filters = sum(count for _, count in cnn["filters"])
    state = {}
    try:
        h5file = h5py.File(weights_hdf5, "r")
    except OSError as error:  # h5py's names no file: "truncated file: eof = 600, ... stored_eof = 49328"
        raise ValueError(
            f"{weights_hdf5}: not a complete HDF5 weights file ({error}); download or copy it again"
        ) from None
    with h5file:
        read = _WeightsFile(h5file, weights_hdf5)
        char_embed = read("char_embed", (N_CHARACTERS - 1, embedding_dim))
        state["char_cnn.char_embeddings.weight"] = np.concatenate(
            [np.zeros((1, embedding_dim), np.float32), char_embed]
        )
        for i, (width, count) in enumerate(cnn["filters"]):
            kernel = read(f"CNN/W_cnn_{i}", (1, width, embedding_dim, count))
            state[f"char_cnn.convolutions.{i}.weight"] = kernel[0].transpose(2, 1, 0)  # (count, E, width)
            state[f"char_cnn.convolutions.{i}.bias"] = read(f"CNN/b_cnn_{i}", (count,))
        for k in range(cnn["n_highway"]):
            group = f"CNN_high_{k}"
            transform = read(f"{group}/W_transform", (n_filters, n_filters)).T
            gate = read(f"{group}/W_carry", (n_filters, n_filters)).T  # bilm-tf's "carry" gate is the transform gate
            state[f"char_cnn.highway.layers.{k}.weight"] = np.concatenate([transform, gate])
            state[f"char_cnn.highway.layers.{k}.bias"] = np.concatenate(
                [read(f"{group}/b_transform", (n_filters,)), read(f"{group}/b_carry", (n_filters,))]
            )
        if n_filters != projection_dim:
            state["char_cnn.projection.weight"] = read("CNN_proj/W_proj", (n_filters, projection_dim)).T
            state["char_cnn.projection.bias"] = read("CNN_proj/b_proj", (projection_dim,))
        for direction, prefix in enumerate(["encoder.forward_layers", "encoder.backward_layers"]):
            for k in range(lstm["n_layers"]):
                group = f"RNN_{direction}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
                input_size = projection_dim  # the token representation, then each layer's output
                kernel = read(f"{group}/W_0", (input_size + projection_dim, 4 * cell_size)).T  # (4H, I + P)
                kernel = _tf_gates_to_torch(kernel, cell_size)
                bias = read(f"{group}/B", (4 * cell_size,)).copy()
                bias[2 * cell_size : 3 * cell_size] += TF_FORGET_BIAS  # TensorFlow's f block
                state[f"{prefix}.{k}.weight_ih"] = kernel[:, :input_size]
                state[f"{prefix}.{k}.weight_hh"] = kernel[:, input_size:]
                state[f"{prefix}.{k}.bias"] = _tf_gates_to_torch(bias, cell_size)
                if projection_dim < cell_size:
                    state[f"{prefix}.{k}.weight_hr"] = read(f"{group}/W_P_0", (cell_size, projection_dim)).T
    return {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in state.items()}


# Every HDF5 file starts with this signature (at byte 0, or at 512, 1024, ... after a user block).
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _file_kind(path) -> str:
    """ "hdf5", "json" (text starting with `{`) or "other", from the first bytes of `path`."""
    with open(path, "rb") as f:
        head = f.read(2048)
    if any(head[offset : offset + 8] == _HDF5_SIGNATURE for offset in (0, 512, 1024)):
        return "hdf5"
    return "json" if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{") else "other"


def _check_argument_order(options_json, weights_hdf5) -> None:
    """Name the files the arguments got when the options and the weights are swapped or of the wrong kind."""
    options_kind, weights_kind = _file_kind(options_json), _file_kind(weights_hdf5)
    if options_kind == "hdf5" and weights_kind == "json":
        raise ValueError(
            f"the arguments are swapped: the options file (OPTIONS_JSON, first) must be the JSON file "
            f"{weights_hdf5}, and the weights (WEIGHTS_HDF5, second) the HDF5 file {options_json}"
        )
    if options_kind == "hdf5":
        raise ValueError(
            f"OPTIONS_JSON (the first argument) must be bilm-tf's options.json, but {options_json} is "
            f"an HDF5 file (the weights?)"
        )
    if weights_kind != "hdf5":
        raise ValueError(
            f"WEIGHTS_HDF5 (the second argument) must be bilm-tf's weights.hdf5, but {weights_hdf5} is "
            f"not an HDF5 file" + (" (it is JSON: the options?)" if weights_kind == "json" else "")
        )


def load_bilm_tf(options_json, weights_hdf5) -> ElmoModel:
    """The `ElmoModel` of bilm-tf's `options_json` + `weights_hdf5`, in eval mode, without writing anything.

    Its vectors are the original's for a batch started from zero LSTM states. Errors name the file: swapped
    arguments, a file of the wrong kind, a missing or misshapen dataset, weights that are not finite.
    """
    _check_argument_order(options_json, weights_hdf5)
    options = read_json_file(options_json, "bilm-tf's JSON options file")
    model = ElmoModel(elmo_config_from_options(options, str(options_json)))
    state = bilm_tf_state_dict(model.config, weights_hdf5)
    check_finite_weights(state, weights_hdf5)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:  # a mismatch here is a bug in this converter, not in the files
        raise RuntimeError(f"converter produced a wrong state dict: missing {missing}, unexpected {unexpected}")
    return model.eval()


def convert_elmo_checkpoint(options_json, weights_hdf5, output_dir, vocab_file=None) -> ElmoModel:
    """Write the ELMo of `options_json` + `weights_hdf5` as an hf_ctx checkpoint in `output_dir`.

    The folder gets an `ElmoModel` (config.json, model.safetensors, the source of hf_ctx's classes) and an
    `ElmoTokenizer`: character ids only, or with the word vocabulary of `vocab_file` (bilm-tf's vocab.txt, e.g.
    for further pretraining with `ElmoForBiLM`, whose softmax the published files do not contain). Returns the
    converted model (`load_bilm_tf`'s).
    """
    check_output_dir(output_dir)
    model = load_bilm_tf(options_json, weights_hdf5)
    config = model.config
    tokenizer = ElmoTokenizer(
        vocab_file=str(vocab_file) if vocab_file is not None else None,
        max_characters_per_token=config.max_characters_per_token,
    )
    if tokenizer.has_word_vocabulary:
        config.vocab_size = tokenizer.vocab_size
        config.bos_token_id, config.eos_token_id = tokenizer.bos_token_id, tokenizer.eos_token_id
        config.unk_token_id = tokenizer.unk_token_id
    check_no_checkpoint_in(output_dir)
    output_dir = Path(output_dir)
    files = [Path(options_json).name, Path(weights_hdf5).name] + ([Path(vocab_file).name] if vocab_file else [])

    save_converted_checkpoint(
        output_dir,
        model,
        tokenizer,
        converter="hf-ctx convert-elmo",
        source="the bilm-tf files " + ", ".join(f"`{name}`" for name in files),
        how="The character CNN, highway and LSTM weights are the original's (TensorFlow's gate order put in "
        "torch's); the language-model softmax is not in the published files.",
    )
    logger.info(
        "converted %s + %s to %s (%s parameters)",
        options_json,
        weights_hdf5,
        output_dir,
        f"{model.num_parameters():,}",
    )
    return model


__all__ = ["bilm_tf_state_dict", "convert_elmo_checkpoint", "elmo_config_from_options", "load_bilm_tf"]
