"""ELMo as a feature extractor: embed a text file once, train other models on the vectors (`hf-ctx embed`).

The output file has the layout of AllenNLP's `elmo` command, so code written for AllenNLP's files reads it:

    "0", "1", ...          one dataset per input line (its 0-based index), float32:
                             (L + 1, words, 2P) with every layer (`output="all"`), else (words, 2P)
    "sentence_to_index"    (1,) string dataset: JSON {sentence: "index"} (a repeated sentence maps to its last line)

Reading it:

    >>> import h5py, json
    >>> with h5py.File("vectors.hdf5", "r") as f:
    ...     layers = f["0"][...]                                    # (3, words, 1024) for the original ELMo
    ...     index = json.loads(f["sentence_to_index"][0])

`output` picks what is written per word: "all" (the L + 1 layers: the token layer and each biLSTM layer, as
`ElmoModel(output_hidden_states=True)` gives them), "top" (the last biLSTM layer), "average" (the mean of the
L + 1 layers) or `scalar_mix_weights` w_0 ... w_L (sum_k w_k h_k, the weights used as given).

A run can be resumed: lines whose datasets exist are skipped. Each dataset records its sentence (an HDF5
attribute; its words are `hf_ctx.data.words.split_words(sentence, word_splitter)`) and the file records the model
(a hash of its weights), the output, the dtype and the word splitter, so a file is only extended with vectors of
the same kind; anything else is an error asking for `overwrite`. Every line is checked (words within the model's
`max_sentence_words`) before the output is touched, and a file replaced (`overwrite`) is written beside it and
renamed over it once whole, so a failure keeps the old file. A new file is written
through `hf_ctx.tools.output_files.CommittedFile`: after each batch it is a complete HDF5 file, and a full disk (or a
kill) leaves it as it was after the last batch, so the same command resumes from there. The file is locked while
it is written: a second run into it (`--overwrite` or not) is refused before it reads or truncates anything.
"""

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..atomic_files import TEMPORARY_PREFIX, TEMPORARY_SUFFIX, fsync_folder, try_lock
from ..configuration_checks import finite_numbers
from ..data.files import strip_invisible_prefix, utf8_lines
from ..data.words import check_word_splitter, split_words
from ..modeling_elmo import ElmoModel
from ..tokenization_elmo import ElmoTokenizer, read_vocabulary_file
from . import option_kinds as kinds
from .output_files import CommittedFile
from .paths import check_elmo_checkpoint, check_model_type

OUTPUTS = ("all", "top", "average")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
FORMAT = "hf_ctx embed 1"  # the file attribute that marks an output of this module


class LayerOutput:
    """Which vectors of ELMo's L + 1 layers to keep: "all" of them, the "top" layer, their "average", or the
    sum of the layers weighted by `scalar_mix_weights` (used as given: a trained `ScalarMix` corresponds to the
    weights gamma * softmax(s)).

    Called on the layers, L + 1 tensors (B, W, D), it returns (B, L + 1, W, D) for "all", else (B, W, D).
    """

    def __init__(self, num_layers: int, output: str = "top", scalar_mix_weights: Sequence[float] | None = None):
        if scalar_mix_weights is not None:
            weights = list(scalar_mix_weights)
            finite_numbers("one per layer")("scalar_mix_weights", weights)
            if len(weights) != num_layers:
                raise ValueError(
                    f"scalar_mix_weights has {len(weights)} weights, this ELMo has {num_layers} layers "
                    f"(the token layer and {num_layers - 1} biLSTM layers): give {num_layers}"
                )
            output = "scalar_mix"
            self.weights = [float(w) for w in weights]
        elif output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS} (or give scalar_mix_weights), got {output!r}")
        else:
            self.weights = None
        self.num_layers = num_layers
        self.output = output

    def __call__(self, layers: Sequence[torch.Tensor]) -> torch.Tensor:
        if len(layers) != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layers, got {len(layers)}")
        if self.output == "top":
            return layers[-1]
        stacked = torch.stack(list(layers), dim=1)  # (B, L + 1, W, D)
        if self.output == "all":
            return stacked
        if self.output == "average":
            return stacked.mean(dim=1)
        weights = torch.tensor(self.weights, dtype=stacked.dtype, device=stacked.device)
        return torch.einsum("l,blwd->bwd", weights, stacked)

    def describe(self) -> str:
        """ "all", "top", "average" or "scalar_mix w_0,...,w_L"."""
        if self.weights is None:
            return self.output
        return "scalar_mix " + ",".join(repr(w) for w in self.weights)


@dataclass(frozen=True)
class _EmbedJob:
    """What one `embed_file` call writes: the lines of its input (`words_of`: line index -> the line's words),
    the file's settings (the attributes an extended file must match), and how the vectors are written."""

    output_path: str
    settings: dict
    sentences: list[str]
    words_of: dict[int, list[str]]
    layer_output: LayerOutput
    batch_size: int
    progress: bool
    sentence_index: bool


def parse_scalar_mix_weights(text: str) -> list[float]:
    """ "0.2,0.3,0.5" -> [0.2, 0.3, 0.5]; a `ValueError` naming the value otherwise."""
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(
            f"--scalar_mix_weights must be comma-separated numbers such as 0.2,0.3,0.5, got {text!r}"
        ) from None


def read_sentences(path: str | os.PathLike) -> list[str]:
    """The lines of a text file of one whitespace-tokenised sentence per line, stripped of surrounding whitespace
    and of invisible prefixes such as a byte-order mark (`data.files.utf8_lines`).

    Errors name the file and line: a file that cannot be opened (`FileNotFoundError`/`OSError`), a line that is
    not UTF-8, empty lines, no lines at all (`ValueError`).
    """
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a folder; hf-ctx embed reads a text file, one sentence per line")
    try:
        with open(path, "rb") as f:  # lines end at b"\n" only: a sentence's index is its line number
            lines = [line.strip() for line in utf8_lines(f, path)]
    except FileNotFoundError:
        raise FileNotFoundError(f"input file {path} does not exist") from None
    except OSError as error:
        raise OSError(f"cannot read the input file {path}: {error.strerror or error}") from None
    sentences, empty = [], []
    for number, line in enumerate(lines, start=1):
        line = strip_invisible_prefix(line)
        if not line:
            empty.append(number)
        sentences.append(line)
    if empty:
        shown = ", ".join(map(str, empty[:10])) + (f" and {len(empty) - 10} more" if len(empty) > 10 else "")
        raise ValueError(
            f"{path}: line{'s' if len(empty) > 1 else ''} {shown} "
            f"{'are' if len(empty) > 1 else 'is'} empty; every line must be one sentence (its "
            "dataset is named after its index), so remove the empty lines"
        )
    if not sentences:
        raise ValueError(f"{path} is empty: no sentences to embed")
    return sentences


def load_elmo(model_name_or_path: str | os.PathLike) -> ElmoModel:
    """An `ElmoModel` from an ELMo checkpoint (`hf-ctx convert-elmo`, `pretrain_elmo.py`, an ELMo task model);
    a `ValueError` for anything else."""
    from transformers.utils import logging as transformers_logging

    path = str(model_name_or_path)
    if os.path.isfile(path):
        raise ValueError(f"{path} is a file; give the folder of an ELMo checkpoint (with config.json)")
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(
            f"{path} has no config.json: it is not a model checkpoint (convert published ELMo weights "
            "with `hf-ctx convert-elmo` first)"
        )
    # A Hub name is "name" or "owner/name"; anything else that is not a folder is a local path that is missing.
    if not os.path.isdir(path) and (
        path.startswith((".", "/", "~")) or path.count("/") > 1 or os.sep in path and os.sep != "/"
    ):
        raise FileNotFoundError(f"model folder {path} does not exist")
    check_model_type(path, "model")
    check_elmo_checkpoint(path, "model", "what hf-ctx embed reads")
    # A biLM or task checkpoint also holds a softmax or classifier that ElmoModel leaves out: expected, so
    # transformers' report of unused weights is silenced; missing ELMo weights are checked below.
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        model, info = ElmoModel.from_pretrained(path, output_loading_info=True)
    finally:
        transformers_logging.set_verbosity(verbosity)
    if info["missing_keys"]:
        missing = sorted(info["missing_keys"])
        raise ValueError(
            f"{path} lacks ELMo weights ({len(missing)} missing, e.g. {missing[0]}): it is not a trained "
            "or converted ELMo biLM"
        )
    return model


def weights_fingerprint(model: torch.nn.Module) -> str:
    """A SHA-256 hash of the model's saved weights (names, dtypes, shapes and values)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def check_output_outside_inputs(output_path, model, inputs=()) -> None:
    """A `ValueError` when the output file is one of the input files (`inputs`; None entries skipped) or lies
    inside the local model folder `model`: writing there would overwrite or add to the checkpoint."""
    output = os.path.realpath(output_path)
    for path in inputs:
        if path is not None and os.path.realpath(path) == output:
            raise ValueError(f"the output file {output_path} is the input file {path}; choose another output path")
    if model is not None and os.path.isdir(model):
        folder = os.path.realpath(model)
        if os.path.commonpath([folder, output]) == folder:
            raise ValueError(
                f"the output file {output_path} is inside the model folder {model}; writing there would change "
                "the checkpoint: choose an output path outside it"
            )


def _open_output(output_path: str, resume: bool):
    """(store, h5py file) of the output: extended when `resume`, else created anew. Written through a
    CommittedFile, so each flush is a durable point that a full disk cannot damage. A file to resume that is not
    HDF5 is a ValueError saying how to go on."""
    import h5py

    store = CommittedFile(output_path, create=not resume)
    try:
        return store, h5py.File(store, "a" if resume else "w")
    except OSError as error:
        store.close()
        if resume:
            raise ValueError(
                f"{output_path} exists and is not a readable HDF5 file ({error}); pass overwrite "
                "(--overwrite) to replace it, or choose another output path"
            ) from None
        raise


@contextlib.contextmanager
def _replacing(output_path: str):
    """The path to write a replacement of the existing file `output_path` at: a locked temporary beside it that
    is renamed over `output_path` when the block ends, and removed (the old file kept whole) when it raises.
    `output_path` itself is locked meanwhile, so a second run into it is refused as for a file extended."""
    lock = os.open(output_path, os.O_RDONLY)
    try:
        if not try_lock(lock):
            raise OSError(
                f"{output_path} is being written by another process; wait for it to finish, or write elsewhere"
            )
        folder = os.path.dirname(os.path.abspath(output_path))
        fd, temporary = tempfile.mkstemp(
            dir=folder, prefix=f"{TEMPORARY_PREFIX}{os.path.basename(output_path)}.", suffix=TEMPORARY_SUFFIX
        )
        os.close(fd)
        try:
            yield temporary
            os.chmod(temporary, os.stat(output_path).st_mode & 0o777)
            os.replace(temporary, output_path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        fsync_folder(folder)
    finally:
        os.close(lock)


def _write_sentence_index(file, sentences: list[str] | None) -> None:
    """AllenNLP's `sentence_to_index` dataset: one JSON string {sentence: dataset name}, replaced if there (removed
    when `sentences` is None)."""
    import h5py

    if "sentence_to_index" in file:
        del file["sentence_to_index"]
    if sentences is None:
        return
    sentence_to_index = {sentence: str(i) for i, sentence in enumerate(sentences)}
    index = file.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
    index[0] = json.dumps(sentence_to_index)


def _write_failure(output_path: str, store: CommittedFile, replacing: bool = False) -> OSError:
    """The error of a write that failed (a full disk, say): what happened, and whether running the same command
    again resumes or the file must go (or, `replacing`, that the file is as it was); it keeps the failure's
    errno."""
    failed = store.failed
    error = OSError(
        f"writing {output_path} failed ({failed.strerror or failed}); "
        + (
            "its replacement was not written and it is as it was: free space and run the same command again"
            if replacing
            else "the file may be damaged: delete it, or run the same command with --overwrite"
            if store.damaged
            else "it keeps every sentence embedded before the failure: free space and run the same "
            "command again to resume"
        )
    )
    error.errno = failed.errno
    return error


class ElmoEmbedder:
    """ELMo vectors of tokenised sentences, in batches, and of whole files (AllenNLP's `elmo` command).

    Args:
        model: an `ElmoModel`, or the path (or Hub name) of an ELMo checkpoint.
        device: where the model runs ("cpu", "cuda", "cuda:1", ...); the default is the GPU when there is one.
        dtype: "float32" (default), "float16" or "bfloat16": the dtype the model computes in. Files always get
            float32 vectors, as AllenNLP writes them.
    """

    def __init__(
        self,
        model: ElmoModel | str | os.PathLike,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
    ):
        if isinstance(dtype, str):
            if dtype not in DTYPES:
                raise ValueError(f"dtype must be one of {list(DTYPES)}, got {dtype!r}")
            dtype = DTYPES[dtype]
        self.model = model if isinstance(model, ElmoModel) else load_elmo(model)
        if not isinstance(self.model, ElmoModel):
            raise ValueError(f"ElmoEmbedder needs an ElmoModel, got {type(self.model).__name__}")
        self.fingerprint = weights_fingerprint(self.model)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu") if device is None else device
        if not isinstance(device, torch.device):
            try:
                device = torch.device(device)
            except (RuntimeError, TypeError):
                raise ValueError(
                    f"device must be 'cpu', 'cuda' or 'cuda:N' (a torch device), got {device!r}"
                ) from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                f"device {str(device)!r} asked for, but this machine (or this torch build) has no CUDA "
                "GPU; use --device cpu"
            )
        self.model.to(device=device, dtype=dtype).eval()
        self.device, self.dtype = device, next(self.model.parameters()).dtype
        self.tokenizer = ElmoTokenizer(max_characters_per_token=self.model.config.max_characters_per_token)

    @property
    def num_layers(self) -> int:
        """L + 1: the token layer and each biLSTM layer."""
        return self.model.config.num_output_layers

    def cache_vocabulary(self, words_or_path) -> int:
        """Cache the token layer of a vocabulary (a list of words, or a file of one word per line such as bilm-tf's
        vocab.txt): see `ElmoModel.cache_token_embeddings`. Returns the number of words cached."""
        words = words_or_path
        if isinstance(words_or_path, (str, os.PathLike)):
            if not os.path.isfile(words_or_path):
                raise FileNotFoundError(f"vocabulary file {words_or_path} does not exist")
            words = read_vocabulary_file(words_or_path)
        return self.model.cache_token_embeddings(words)

    @torch.no_grad()
    def embed_batch(
        self, sentences: Sequence[Sequence[str]], layer_output: LayerOutput | None = None
    ) -> list[np.ndarray]:
        """Each sentence's vectors as float32 arrays: (L + 1, words, 2P) for "all" (the default), else (words, 2P).

        sentences: lists of words, at least one word each. Every vector equals that of the sentence run alone
        (up to float rounding): padding never reaches a sentence's words.
        """
        layer_output = layer_output or LayerOutput(self.num_layers, "all")
        # A string is a sequence too: of characters, each taken for a word (or a sentence) without a word.
        if isinstance(sentences, (str, bytes)) or not isinstance(sentences, Sequence):
            raise TypeError(
                f"sentences must be a list of sentences, each a list of words; got {type(sentences).__name__}"
            )
        for index, words in enumerate(sentences):
            if isinstance(words, (str, bytes)) or not isinstance(words, Sequence):
                raise TypeError(
                    f"sentences[{index}] must be a list of words, got {type(words).__name__} {words!r:.40}"
                )
            if not words:
                raise ValueError(f"sentence {index} has no words")
        batch = self.tokenizer(
            [list(words) for words in sentences], is_split_into_words=True, padding=True, return_tensors="pt"
        ).to(self.device)
        layers = self.model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            output_hidden_states=True,
            return_dict=True,
        ).hidden_states
        vectors = layer_output(layers).float().cpu().numpy()  # (B, [L + 1,] W, D)
        return [vectors[i, ..., : len(words), :] for i, words in enumerate(sentences)]

    def embed_file(
        self,
        input_path: str | os.PathLike,
        output_path: str | os.PathLike,
        output: str = "all",
        scalar_mix_weights: Sequence[float] | None = None,
        batch_size: int = 64,
        overwrite: bool = False,
        progress: bool = True,
        word_splitter: str = "whitespace",
        sentence_index: bool = True,
    ) -> dict:
        """Write the vectors of every line of `input_path` (one sentence per line) to the HDF5 file `output_path`,
        in AllenNLP's layout (see the module docstring). Lines are split into words by `hf_ctx.data.words` under
        `word_splitter`: "whitespace" (the default, AllenNLP's: the text is already tokenized) or "treebank" (raw
        text, punctuation off words as CoNLL and the Penn Treebank split it), which the file records.

        Sentences are batched `batch_size` at a time after sorting by length (little padding); datasets are named
        after the line index, so the order of computing does not show in the file. An existing `output_path`
        written by this method is extended (lines already there are kept) unless `overwrite`; its model, output
        and dtype must be this run's. `sentence_index=False` leaves out the `sentence_to_index` dataset (AllenNLP's
        `--forget-sentences`). Returns {"sentences", "embedded", "kept", "words"}: the file's line count, lines
        embedded now, lines already in the file, and words embedded now.
        """
        kinds.BATCH_SIZE.check("batch_size", batch_size)
        layer_output = LayerOutput(self.num_layers, output, scalar_mix_weights)
        sentences = read_sentences(input_path)
        settings = {
            "format": FORMAT,
            "output": layer_output.describe(),
            "model": self.fingerprint,
            "dtype": str(self.dtype).removeprefix("torch."),
            "word_splitter": check_word_splitter(word_splitter),
        }
        output_path = os.fspath(output_path)
        folder = os.path.dirname(os.path.abspath(output_path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"the output folder {folder} does not exist")
        # The folder the model was loaded from (a path or an ElmoModel's `name_or_path`): a Hub name is no folder.
        check_output_outside_inputs(output_path, self.model.name_or_path or None, [input_path])
        # Every line is split and checked before the output is touched: a line the model cannot take is an error
        # naming it, not a failure half-way through the file.
        job = _EmbedJob(
            output_path=output_path,
            settings=settings,
            sentences=sentences,
            words_of={i: split_words(sentence, word_splitter) for i, sentence in enumerate(sentences)},
            layer_output=layer_output,
            batch_size=batch_size,
            progress=progress,
            sentence_index=sentence_index,
        )
        self._check_lengths(input_path, job.words_of)
        # An empty file is what a run that failed before its first flush leaves: nothing to resume.
        exists = os.path.exists(output_path) and os.path.getsize(output_path) > 0
        resume = exists and not overwrite
        # A file replaced (--overwrite) is written beside it and renamed over it once whole: a failure keeps it.
        with _replacing(output_path) if exists and overwrite else contextlib.nullcontext(output_path) as target:
            done, todo, words = self._embed_into(target, resume, job)
        return {"sentences": len(sentences), "embedded": len(todo), "kept": len(done), "words": words}

    def _check_lengths(self, input_path, words_of: dict[int, list[str]]) -> None:
        """A `ValueError` naming the first line with more words than the model's `max_sentence_words`."""
        limit = self.model.config.max_sentence_words
        for i, words in words_of.items():
            if len(words) > limit:
                raise ValueError(
                    f"{input_path}:{i + 1}: {len(words)} words, more than this ELMo's max_sentence_words={limit}; "
                    "split the line into sentences (nothing was written)"
                )

    def _embed_into(self, target: str, resume: bool, job: _EmbedJob) -> tuple[set[int], list[int], int]:
        """Write the lines of `job` not yet in the file at `target` (`job.output_path`, or its replacement being
        written); returns (lines kept, lines embedded, words embedded)."""
        store, file = _open_output(target, resume)
        done, todo, words = set(), [], 0
        try:
            with file:
                done = self._check_existing(file, job) if resume else set()
                if not resume:
                    file.attrs.update(job.settings)
                file.flush()
                todo = [i for i in job.words_of if i not in done]
                todo.sort(key=lambda i: len(job.words_of[i]), reverse=True)  # longest first: little padding
                words = self._write_vectors(file, job, todo)
                _write_sentence_index(file, job.sentences if job.sentence_index else None)
        except Exception as error:
            if store.failed is None:
                raise
            raise _write_failure(job.output_path, store, replacing=target != job.output_path) from error
        finally:
            store.close()
        return done, todo, words

    def _write_vectors(self, file, job: _EmbedJob, todo: list[int]) -> int:
        """Embed the lines `todo` (indices into `job.sentences`) `job.batch_size` at a time into `file`, one dataset
        per line, flushing after each batch; returns the number of words embedded."""
        from tqdm import tqdm

        words = 0
        with tqdm(total=len(todo), unit="sentence", desc="embedding", disable=not job.progress) as bar:
            for start in range(0, len(todo), job.batch_size):
                indices = todo[start : start + job.batch_size]
                split = [job.words_of[i] for i in indices]
                for i, vectors in zip(indices, self.embed_batch(split, job.layer_output)):
                    dataset = file.create_dataset(str(i), data=vectors, dtype="float32")
                    dataset.attrs["sentence"] = job.sentences[i]
                file.flush()  # a durable point: what is written survives an interruption or a full disk
                words += sum(map(len, split))
                bar.update(len(indices))
        return words

    @staticmethod
    def _check_existing(file, job: _EmbedJob) -> set[int]:
        """The line indices an existing output already holds; a `ValueError` unless it was written by this method
        with the job's settings, for the job's sentences."""
        settings, sentences, path = job.settings, job.sentences, job.output_path
        found = {key: file.attrs[key] for key in settings if key in file.attrs}
        if found.get("format") != FORMAT:
            raise ValueError(
                f"{path} exists and was not written by hf-ctx embed; pass overwrite (--overwrite) to "
                "replace it, or choose another output path"
            )
        for key, value in settings.items():
            if found.get(key) != value:
                names = {
                    "output": "output (--all/--top/--average/--scalar_mix_weights)",
                    "model": "model weights",
                    "dtype": "dtype",
                    "word_splitter": "word splitter (--pretokenized or not)",
                }
                raise ValueError(
                    f"{path} holds vectors with another {names.get(key, key)} ({found.get(key)!r}, this "
                    f"run: {value!r}); pass overwrite (--overwrite) to replace it, or choose another "
                    "output path"
                )
        done = set()
        for key in list(file.keys()):
            if key == "sentence_to_index":
                continue
            if not key.isdigit():
                raise ValueError(f"{path} holds a dataset {key!r} that hf-ctx embed did not write")
            index = int(key)
            stored = file[key].attrs.get("sentence")
            if stored is None:
                del file[key]  # interrupted between writing the vectors and their sentence: write it again
                continue
            if index >= len(sentences) or stored != sentences[index]:
                now = f"is {sentences[index]!r}" if index < len(sentences) else "does not exist"
                raise ValueError(
                    f"{path} holds vectors of another text: its line {index + 1} was {stored!r}, the "
                    f"input's line {index + 1} {now}; pass overwrite (--overwrite) to start again"
                )
            done.add(index)
        return done


__all__ = ["ElmoEmbedder", "LayerOutput", "load_elmo", "parse_scalar_mix_weights", "read_sentences"]
