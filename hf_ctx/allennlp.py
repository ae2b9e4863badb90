"""AllenNLP's ELMo API on hf_ctx: `Elmo`, `batch_to_ids` and `ElmoEmbedder`, so that code written against
`allennlp.modules.elmo` and `allennlp.commands.elmo` runs with its import changed:

    from hf_ctx.allennlp import Elmo, batch_to_ids            # was: from allennlp.modules.elmo import ...
    from hf_ctx.allennlp import ElmoEmbedder                  # was: from allennlp.commands.elmo import ...

Each is a thin layer over hf_ctx's own pieces: the biLM is `ElmoModel` (read from bilm-tf's options.json +
weights.hdf5 by `tools.convert_elmo.load_bilm_tf`, or an hf_ctx ELMo checkpoint folder), the character ids come
from `ElmoTokenizer`, the layer weighting is `layers.ScalarMix`, and `ElmoEmbedder` is `tools.embed.ElmoEmbedder`
(`hf-ctx embed`). AllenNLP itself is not needed.

Where hf_ctx differs from AllenNLP on purpose (docs/migrating.md lists it all):
- the biLM's LSTMs start from zero states in every batch. AllenNLP's carried each batch row's final states into
  the next batch, so a sentence's vectors depended on what ran before it (the same sentence twice gave two
  answers); hf_ctx's are the original TensorFlow model's for a batch started from zero, whatever came before;
- `vocab_to_cache` caches the token layer by the words' character ids (`ElmoModel.cache_token_embeddings`):
  `word_inputs` are accepted and not needed, and a word outside the cache runs through the character CNN;
- files are local paths: nothing is downloaded (AllenNLP fetched URLs).

This module is a front door (layer 3, like `hf_ctx/__init__.py`): nothing in the package imports it.
"""

import logging
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import islice

import numpy as np
import torch
from torch import nn

from .configuration_checks import finite_numbers, optional
from .layers import ScalarMix
from .modeling_elmo import ElmoModel, elmo_input_mask
from .tokenization_elmo import ElmoTokenizer
from .tools import embed
from .tools import option_kinds as kinds
from .tools.convert_elmo import load_bilm_tf

logger = logging.getLogger(__name__)

# Where AllenNLP's ElmoEmbedder() fetched the original ELMo from when given no files.
ORIGINAL_ELMO_URL = "https://allennlp.s3.amazonaws.com/models/elmo/2x4096_512_2048cnn_2xhighway/"
DEFAULT_BATCH_SIZE = 64


def load_bilm(options_file, weight_file=None) -> ElmoModel:
    """The biLM of bilm-tf's `options_file` + `weight_file` (the published ELMo files), or, with `weight_file`
    None, of an hf_ctx ELMo checkpoint named by `options_file` (a folder written by `hf-ctx convert-elmo` or
    `examples/pretrain_elmo.py`, or a Hub name). In eval mode. Errors name the argument and the file."""
    for name, value in (("options_file", options_file), ("weight_file", weight_file)):
        if isinstance(value, str) and value.startswith(("http://", "https://", "s3://")):
            raise ValueError(
                f"{name} is a URL ({value}); hf_ctx reads local files and downloads nothing: fetch the file once "
                "(e.g. with curl -O) and pass its path"
            )
    if options_file is None:
        raise ValueError(
            "options_file is required: bilm-tf's options.json (with its weights.hdf5 as weight_file), or an "
            "hf_ctx ELMo checkpoint folder (with weight_file=None)"
        )
    options_file = os.fspath(options_file)
    if weight_file is None:
        if os.path.isfile(options_file):
            raise ValueError(
                f"weight_file is missing: {options_file} is a file, so give bilm-tf's weights.hdf5 as weight_file "
                "(an hf_ctx checkpoint is given as its folder alone)"
            )
        return embed.load_elmo(options_file).eval()
    weight_file = os.fspath(weight_file)
    if os.path.isdir(options_file):
        raise ValueError(
            f"options_file {options_file} is a folder: pass an hf_ctx ELMo checkpoint folder alone "
            f"(weight_file=None), not with weight_file={weight_file!r}"
        )
    for name, path in (("options_file", options_file), ("weight_file", weight_file)):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{name} {path} does not exist")
    return load_bilm_tf(options_file, weight_file)


@lru_cache(maxsize=1)
def _character_tokenizer() -> ElmoTokenizer:
    """ELMo's character ids, without a word vocabulary."""
    return ElmoTokenizer()


def batch_to_ids(batch: Sequence[Sequence[str]]) -> torch.Tensor:
    """Tokenized sentences -> ELMo's character ids, (len(batch), longest sentence, 50) int64, as AllenNLP's.

    Each word is begin-of-word, its UTF-8 bytes (at most 48), end-of-word and padding characters, every id shifted
    by one; padding words (after a shorter sentence's words) are all 0; `<S>` and `</S>` get the sentence-boundary
    encodings. The ids are `ElmoTokenizer`'s (`hf_ctx.elmo_characters`).
    """
    if not isinstance(batch, (list, tuple)):
        raise ValueError(
            f"batch_to_ids takes a list of tokenized sentences (lists of words), got {type(batch).__name__}"
        )
    if not batch:
        return torch.zeros((0, 0, 50), dtype=torch.long)
    if isinstance(batch[0], str):
        raise ValueError(
            "batch_to_ids takes tokenized sentences (a list of lists of words) and got a list of strings; "
            "split each sentence into its words first, e.g. [s.split() for s in sentences]"
        )
    tokenizer = _character_tokenizer()
    return tokenizer(list(batch), is_split_into_words=True, padding=True, return_tensors="pt")["input_ids"]


class Elmo(nn.Module):
    """ELMo representations of character ids: `num_output_representations` scalar mixes of the biLM's L + 1
    layers (the character-CNN token layer and each biLSTM layer), each with its own weights, from one run of the
    biLM. AllenNLP's `allennlp.modules.elmo.Elmo`, with its arguments and outputs.

    Args:
        options_file: bilm-tf's options.json, or an hf_ctx ELMo checkpoint folder (then `weight_file` is None).
        weight_file: bilm-tf's weights.hdf5 (None with a checkpoint folder).
        num_output_representations: how many differently weighted mixes of the layers to return (1 or 2,
            typically: ELMo at a task model's input, and also at its output).
        requires_grad: train the biLM's weights too (fine-tuning); by default they are fixed.
        do_layer_norm: normalise each layer to zero mean and unit variance over the batch's words and boundaries
            before mixing (`ScalarMix(do_layer_norm=True)`).
        dropout: dropout applied to each representation.
        vocab_to_cache: words whose token layer is computed once and looked up afterwards
            (`ElmoModel.cache_token_embeddings`); other words still run through the character CNN.
        keep_sentence_boundaries: return the `<S>` and `</S>` positions too (timesteps + 2).
        scalar_mix_parameters: fixed, untrained pre-softmax weights of the layers, one per layer (e.g.
            [-9e10, -9e10, 1] keeps the top layer of a 2-layer ELMo alone); None: trained, starting equal.
        module: an hf_ctx `ElmoModel` to use instead of reading files (`options_file` and `weight_file` None);
            `requires_grad` then leaves its parameters as they are, as AllenNLP did.

    The biLM runs without dropout of its own, in training too, as AllenNLP's did. Unlike AllenNLP's, its LSTMs
    start from zero states in every batch (AllenNLP carried each row's final states into the next batch), so a
    sentence's vectors do not depend on what ran before it. Padding positions are zero in every representation.
    The module's parameter names are hf_ctx's: the biLM is `bilm`, the mixes `scalar_mix_0`, `scalar_mix_1`, ...
    """

    def __init__(
        self,
        options_file,
        weight_file,
        num_output_representations: int,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        vocab_to_cache: Sequence[str] | None = None,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: Sequence[float] | None = None,
        module: ElmoModel | None = None,
    ):
        super().__init__()
        kinds.COUNT.check("num_output_representations", num_output_representations)
        kinds.PROBABILITY.check("dropout", dropout)
        for name, value in (
            ("requires_grad", requires_grad),
            ("do_layer_norm", do_layer_norm),
            ("keep_sentence_boundaries", keep_sentence_boundaries),
        ):
            kinds.check_flag(name, value)
        if module is not None:
            if options_file is not None or weight_file is not None:
                raise ValueError("give options_file and weight_file, or module, not both (pass None for the files)")
            if not isinstance(module, ElmoModel):
                raise ValueError(
                    f"module must be an hf_ctx ElmoModel (AllenNLP's own biLM modules are not supported), got "
                    f"{type(module).__name__}"
                )
            self.bilm = module.eval()
        else:
            self.bilm = load_bilm(options_file, weight_file)
            self.bilm.requires_grad_(requires_grad)
        num_layers = self.bilm.config.num_output_layers
        optional(finite_numbers("one per layer"), "trained")("scalar_mix_parameters", scalar_mix_parameters)
        if scalar_mix_parameters is not None and len(scalar_mix_parameters) != num_layers:
            raise ValueError(
                f"scalar_mix_parameters has {len(scalar_mix_parameters)} values; this ELMo has {num_layers} layers "
                f"(the token layer and {num_layers - 1} biLSTM layers): give {num_layers}"
            )
        if vocab_to_cache is not None:
            self.bilm.cache_token_embeddings(vocab_to_cache)
        self._has_cached_vocab = vocab_to_cache is not None
        self._keep_sentence_boundaries = keep_sentence_boundaries
        self._dropout = nn.Dropout(p=dropout)
        for k in range(num_output_representations):
            mix = ScalarMix(
                num_layers,
                do_layer_norm=do_layer_norm,
                initial_scalar_parameters=scalar_mix_parameters,
                trainable=scalar_mix_parameters is None,
            )
            self.add_module(f"scalar_mix_{k}", mix)
        self.num_output_representations = num_output_representations

    def get_output_dim(self) -> int:
        """The width of each representation: 2 * projection_dim (1024 for the original ELMo)."""
        return self.bilm.config.hidden_size

    def train(self, mode: bool = True):
        super().train(mode)
        self.bilm.eval()  # no dropout inside the biLM, as in AllenNLP
        return self

    def forward(self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None) -> dict:
        """
        Args:
            inputs: (batch, timesteps, 50) character ids (`batch_to_ids`), or (..., timesteps, 50): leading
                dimensions are flattened into the batch and restored in the outputs.
            word_inputs: (batch, timesteps) (or (..., timesteps)) word ids into `vocab_to_cache`, as AllenNLP took
                them with a cached vocabulary. Accepted and not needed: the cache is keyed by the words'
                character ids, so `inputs` must hold every word's characters.

        Returns:
            {"elmo_representations": `num_output_representations` tensors (batch, timesteps, 2P), "mask": (batch,
            timesteps) bool, True at words}; with `keep_sentence_boundaries`, timesteps + 2 (`<S>` first, `</S>`
            right after each sentence's last word) in both. Sentences of no words give (batch, 0, 2P) and an empty
            (batch, 0) mask (with boundaries: the two of each); a batch of no sentences (`batch_to_ids([])`) is a
            `ValueError`, as for `ElmoModel`.
        """
        if not isinstance(inputs, torch.Tensor) or inputs.dim() < 3:
            raise ValueError(
                "inputs must be character ids of shape (batch, timesteps, 50) as batch_to_ids returns them, got "
                + (f"shape {tuple(inputs.shape)}" if isinstance(inputs, torch.Tensor) else type(inputs).__name__)
            )
        leading, timesteps = inputs.shape[:-2], inputs.shape[-2]
        sentences = math.prod(leading)
        if sentences == 0:  # as ElmoModel refuses it; a batch of empty sentences is fine
            raise ValueError(f"inputs hold no sentences (batch size 0, shape {tuple(inputs.shape)})")
        # The batch size given, not -1: reshape(-1, 0, 50) of empty sentences is ambiguous.
        character_ids = inputs.reshape(sentences, timesteps, inputs.shape[-1])
        if word_inputs is not None:
            if not self._has_cached_vocab:
                logger.warning("Word inputs were passed to ELMo but it does not have a cached vocab.")
            elif tuple(word_inputs.shape) != tuple(inputs.shape[:-1]):
                raise ValueError(
                    f"word_inputs has shape {tuple(word_inputs.shape)}, expected the words of inputs: "
                    f"{tuple(inputs.shape[:-1])}"
                )
        mask = elmo_input_mask(self.bilm.config, character_ids, None)
        layers, mask_with_boundaries = self.bilm.bilm_layers(character_ids, mask)
        representations = []
        for k in range(self.num_output_representations):
            mixed = getattr(self, f"scalar_mix_{k}")(layers, mask_with_boundaries)  # (B, T + 2, 2P)
            if not self._keep_sentence_boundaries:
                mixed = self.bilm.word_layers([mixed], mask)[0]  # (B, T, 2P)
            representations.append(self._dropout(mixed))
        out_mask = mask_with_boundaries if self._keep_sentence_boundaries else mask
        steps = out_mask.shape[-1]
        return {
            "elmo_representations": [r.view(*leading, steps, r.shape[-1]) for r in representations],
            "mask": out_mask.view(*leading, steps),
        }


class ElmoEmbedder:
    """ELMo vectors as numpy arrays: every layer of each word of tokenized sentences, and whole files in
    AllenNLP's HDF5 layout. AllenNLP's `allennlp.commands.elmo.ElmoEmbedder`, over `hf_ctx.tools.embed`'s
    (what `hf-ctx embed` runs).

    Args:
        options_file: bilm-tf's options.json, or an hf_ctx ELMo checkpoint folder (then `weight_file` is None).
            Required: AllenNLP downloaded the original ELMo when it was left out; hf_ctx downloads nothing.
        weight_file: bilm-tf's weights.hdf5 (None with a checkpoint folder).
        cuda_device: the GPU to run on, -1 for the CPU.

    Vectors do not depend on the other sentences of a batch or on earlier batches (AllenNLP's did: its LSTM
    states ran on from batch to batch).
    """

    def __init__(self, options_file=None, weight_file=None, cuda_device: int = -1):
        if options_file is None and weight_file is None:
            raise ValueError(
                "ElmoEmbedder needs the ELMo files: AllenNLP downloaded the original ELMo when none were given, "
                "hf_ctx downloads nothing. Fetch elmo_2x4096_512_2048cnn_2xhighway_options.json and "
                f"..._weights.hdf5 once from {ORIGINAL_ELMO_URL} and pass their paths"
            )
        if not isinstance(cuda_device, int) or isinstance(cuda_device, bool) or cuda_device < -1:
            raise ValueError(f"cuda_device must be a GPU index or -1 (the CPU), got {cuda_device!r}")
        if cuda_device >= 0 and not torch.cuda.is_available():
            raise ValueError(
                f"cuda_device={cuda_device} asks for a GPU, but this machine (or this torch build) has none; "
                "use cuda_device=-1"
            )
        device = "cpu" if cuda_device < 0 else f"cuda:{cuda_device}"
        self.embedder = embed.ElmoEmbedder(load_bilm(options_file, weight_file), device=device)
        self.cuda_device = cuda_device

    @property
    def model(self) -> ElmoModel:
        """The hf_ctx biLM."""
        return self.embedder.model

    def batch_to_embeddings(self, batch: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Every layer of a batch of tokenized sentences: activations (batch, L + 1, timesteps, 2P) and the mask
        (batch, timesteps), True at words."""
        character_ids = batch_to_ids(batch).to(self.embedder.device)
        with torch.no_grad():
            layers = self.model(input_ids=character_ids, output_hidden_states=True).hidden_states
        return torch.stack(layers, dim=1), (character_ids != 0).any(dim=-1)

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """The ELMo vectors of one tokenized sentence: (L + 1, words, 2P) float32 ((3, words, 1024) for the
        original ELMo)."""
        return self.embed_batch([sentence])[0]

    def embed_batch(self, batch: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Each sentence's vectors, (L + 1, words, 2P) float32; an empty sentence gets (L + 1, 0, 2P)."""
        words = [i for i, sentence in enumerate(batch) if len(sentence) > 0]
        config = self.model.config
        embeddings = [np.zeros((config.num_output_layers, 0, config.hidden_size), np.float32) for _ in batch]
        if words:
            for i, vectors in zip(words, self.embedder.embed_batch([batch[i] for i in words])):
                embeddings[i] = vectors
        return embeddings

    def embed_sentences(
        self, sentences: Iterable[Sequence[str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> Iterator[np.ndarray]:
        """The vectors of each sentence of an iterable, in order, computed `batch_size` sentences at a time."""
        kinds.BATCH_SIZE.check("batch_size", batch_size)
        sentences = iter(sentences)
        while batch := list(islice(sentences, batch_size)):
            yield from self.embed_batch(batch)

    def embed_file(
        self,
        input_file,
        output_file_path,
        output_format: str = "all",
        batch_size: int = DEFAULT_BATCH_SIZE,
        forget_sentences: bool = False,
        use_sentence_keys: bool = False,
    ) -> None:
        """Write the vectors of every line of `input_file` (one whitespace-tokenized sentence per line; a path, or
        a file opened from one, which is closed afterwards as AllenNLP did) to the HDF5 file `output_file_path`:
        a float32 dataset per line index ("0", "1", ...), (L + 1, words, 2P) for `output_format="all"`, (words, 2P)
        for "top" or "average", and `sentence_to_index` ({sentence: "index"} as JSON) unless `forget_sentences`.

        An existing output file is replaced. Empty lines are an error naming them. The file is written as
        `hf-ctx embed` writes it (`tools.embed.ElmoEmbedder.embed_file`): sentences are batched by length, which
        changes no vector, and a failed run leaves the file as it was after its last complete batch.
        `use_sentence_keys=True` (datasets named after their sentences) is not supported: line indices are the
        keys, as in AllenNLP by default, and `sentence_to_index` maps sentences to them.
        """
        if use_sentence_keys:
            raise ValueError(
                "use_sentence_keys=True is not supported: datasets are named after their line index, and "
                "sentence_to_index maps each sentence to it"
            )
        if output_format not in embed.OUTPUTS:
            raise ValueError(f"output_format must be one of {embed.OUTPUTS}, got {output_format!r}")
        input_path = input_file
        if hasattr(input_file, "read"):
            input_path = getattr(input_file, "name", None)
            if not isinstance(input_path, (str, bytes, os.PathLike)) or not os.path.isfile(input_path):
                raise ValueError(
                    f"input_file must be a path or a file opened from one, got a {type(input_file).__name__} "
                    "without a file path"
                )
        try:
            self.embedder.embed_file(
                input_path,
                output_file_path,
                output=output_format,
                batch_size=batch_size,
                overwrite=True,
                word_splitter="whitespace",  # lines are tokenized text, as AllenNLP's command read them
                sentence_index=not forget_sentences,
            )
        finally:
            if hasattr(input_file, "close"):
                input_file.close()


__all__ = ["Elmo", "ElmoEmbedder", "batch_to_ids", "load_bilm"]
