"""The `hf-ctx` console script: one subcommand per task, each a thin wrapper over a library function.

Only the standard library is imported here: a subcommand imports what it needs when it runs, and the console
script's entry point (`hf_ctx_cli.py`, outside the package) loads this file without running `hf_ctx/__init__.py`
(which imports torch and transformers to register hf_ctx's models), so that `--help`, `--version` and argument
errors answer at once.
"""

import argparse
import ast
import importlib.util
import os
import sys
import warnings
from contextlib import nullcontext
from pathlib import Path


def _load_option_kinds():
    """hf_ctx.tools.option_kinds (standard library only at import), loaded by its path as this module is
    (`hf_ctx_cli.py`): importing it by name would run hf_ctx's `__init__`, torch and all."""
    name = "hf_ctx.tools.option_kinds"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("option_kinds.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# Every option states its kind in its declaration: `type=kinds.COUNT` converts the text and names the kind that
# `CheckedArgumentParser` checks once parsed (tests/hostile/test_options.py fails for an option without one).
kinds = _load_option_kinds()

DESCRIPTION = """\
hf_ctx command line: train a BERT WordPiece tokenizer, convert transformers BERT and published ELMo
checkpoints into hf_ctx checkpoints, and embed a text file with ELMo into an HDF5 file. Errors in the input print one line (error: ...) and exit with status 1;
--debug, or HF_CTX_DEBUG=1 in the environment, shows the traceback instead."""


def _add_convert_bert(subparsers):
    p = subparsers.add_parser("convert-bert", help="convert a transformers BERT checkpoint folder to hf_ctx")
    p.add_argument(
        "src_dir",
        type=kinds.EXISTING_FOLDER,
        help="folder with config.json, weights and tokenizer files of a transformers BERT",
    )
    p.add_argument("out_dir", type=kinds.OUTPUT_FOLDER, help="where to write the hf_ctx checkpoint")
    p.add_argument(
        "--weights_only",
        action="store_true",
        help="convert the model alone (the source has no tokenizer files); a tokenizer in out_dir stays",
    )
    p.add_argument(
        "--source_name",
        type=kinds.TEXT,
        help="the source's Hub id, which the model card names (default: read from src_dir: a Hub cache "
        "snapshot's id, config.json's _name_or_path, else the folder's name)",
    )

    def run(args):
        from .convert_bert import convert_bert_checkpoint
        from .trainer import transformers_progress_bars_off

        with transformers_progress_bars_off():
            convert_bert_checkpoint(
                args.src_dir, args.out_dir, weights_only=args.weights_only, source_name=args.source_name
            )
        print(f"wrote hf_ctx checkpoint to {args.out_dir}")

    p.set_defaults(func=run)


def _add_train_tokenizer(subparsers):
    p = subparsers.add_parser(
        "train-tokenizer",
        help="train a WordPiece tokenizer from raw text files",
        description="Train a BERT WordPiece tokenizer (transformers' BertTokenizer) from raw text files and save it "
        "with save_pretrained.",
    )
    p.add_argument(
        "files", nargs="+", type=kinds.EXISTING_FILE, help="raw text files, one sentence or paragraph per line"
    )
    p.add_argument("--output_dir", required=True, type=kinds.OUTPUT_FOLDER, help="where to save the tokenizer files")
    p.add_argument(
        "--vocab_size",
        type=kinds.VOCABULARY_SIZE,
        default=8000,
        help="vocabulary size, special tokens included (the corpus' whole alphabet is kept, so the "
        "result may be a little larger; default %(default)s)",
    )
    p.add_argument(
        "--min_frequency",
        type=kinds.COUNT,
        default=2,
        help="least number of occurrences of a merged piece (default %(default)s)",
    )
    casing = p.add_mutually_exclusive_group()  # given together, argparse would take the last one in silence
    casing.add_argument(
        "--lowercase",
        dest="lowercase",
        action="store_true",
        default=True,
        help="lower-case the text and strip accents (uncased BERT; the default)",
    )
    casing.add_argument(
        "--no_lowercase", dest="lowercase", action="store_false", help="keep case and accents (cased BERT)"
    )
    casing.add_argument("--cased", dest="lowercase", action=_DeprecatedCased, nargs=0, help=argparse.SUPPRESS)
    p.add_argument(
        "--model_max_length",
        type=kinds.LENGTH,
        default=512,
        help="longest input, in tokens, the tokenizer allows: the model's max_position_embeddings "
        "(default %(default)s)",
    )

    def run(args):
        from ..data.atomic_write import save_pretrained_atomically
        from ..data.wordpiece import train_wordpiece_tokenizer, vocabulary_shortfall
        from .paths import check_no_model_in, check_output_dir

        check_output_dir(args.output_dir)
        check_no_model_in(args.output_dir)
        tokenizer = train_wordpiece_tokenizer(
            args.files,
            vocab_size=args.vocab_size,
            min_frequency=args.min_frequency,
            lowercase=args.lowercase,
            model_max_length=args.model_max_length,
        )
        save_pretrained_atomically(tokenizer, args.output_dir)
        shortfall = vocabulary_shortfall(len(tokenizer), args.vocab_size, args.min_frequency)
        print(
            f"wrote a {len(tokenizer)}-token WordPiece tokenizer to {args.output_dir}"
            + (f", {shortfall} (--vocab_size, --min_frequency)" if shortfall else "")
        )

    p.set_defaults(func=run)


def _add_convert_elmo(subparsers):
    p = subparsers.add_parser("convert-elmo", help="convert a published ELMo (bilm-tf options.json + weights.hdf5)")
    p.add_argument("options_json", type=kinds.EXISTING_FILE, help="the model's options.json")
    p.add_argument("weights_hdf5", type=kinds.EXISTING_FILE, help="the model's weights.hdf5")
    p.add_argument(
        "output_dir", type=kinds.OUTPUT_FOLDER, help="where to write the hf_ctx checkpoint (model and tokenizer)"
    )
    p.add_argument(
        "--vocab_file", type=kinds.EXISTING_FILE, help="bilm-tf vocab.txt, to give the tokenizer a word vocabulary"
    )

    def run(args):
        from .convert_elmo import convert_elmo_checkpoint
        from .trainer import transformers_progress_bars_off

        with transformers_progress_bars_off():
            convert_elmo_checkpoint(args.options_json, args.weights_hdf5, args.output_dir, vocab_file=args.vocab_file)
        print(f"wrote hf_ctx ELMo checkpoint to {args.output_dir}")

    p.set_defaults(func=run)


def _add_embed(subparsers):
    p = subparsers.add_parser(
        "embed",
        help="write the ELMo vectors of a text file (one sentence per line) to HDF5, as AllenNLP's elmo command",
        description="Write the ELMo vectors of every line of INPUT_FILE (one sentence per line, split into words as "
        "CoNLL and the Penn Treebank split text, or on spaces with --pretokenized) "
        'to OUTPUT_FILE in AllenNLP\'s layout: a dataset per line index ("0", "1", ...) of shape '
        "(layers, words, 2P) with --all, (words, 2P) otherwise, and a sentence_to_index JSON dataset. "
        "An existing OUTPUT_FILE is extended (lines already there are skipped) unless --overwrite.",
    )
    p.add_argument("model", type=kinds.MODEL, help="an ELMo checkpoint folder (hf-ctx convert-elmo, pretrain_elmo.py)")
    p.add_argument("input_file", type=kinds.EXISTING_FILE, help="text file, one sentence per line, no empty lines")
    p.add_argument("output_file", type=kinds.OUTPUT_FILE, help="the HDF5 file to write (or to extend)")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--all",
        dest="output",
        action="store_const",
        const="all",
        help="every layer: (layers, words, 2P) per sentence (the default)",
    )
    which.add_argument("--top", dest="output", action="store_const", const="top", help="the top biLSTM layer")
    which.add_argument(
        "--average", dest="output", action="store_const", const="average", help="the average of the layers"
    )
    which.add_argument(
        "--scalar_mix_weights",
        metavar="W0,W1,W2",
        type=kinds.TEXT,
        help="the layers summed with these weights (one per layer, used as given)",
    )
    p.add_argument(
        "--batch_size", type=kinds.BATCH_SIZE, default=64, help="sentences per batch (sorted by length first)"
    )
    p.add_argument("--device", type=kinds.TEXT, help="cpu, cuda, cuda:1, ... (default: the GPU when there is one)")
    p.add_argument(
        "--dtype",
        type=kinds.TEXT,
        default="float32",
        choices=["float32", "float16", "bfloat16"],
        help="the dtype the model computes in (vectors are written as float32)",
    )
    p.add_argument(
        "--vocab_file",
        type=kinds.EXISTING_FILE,
        help="words (one per line, e.g. bilm-tf's vocab.txt) whose token layer is "
        "computed once and looked up: faster, same vectors",
    )
    p.add_argument(
        "--pretokenized",
        action="store_true",
        help="the lines are already tokenized: split words on spaces only (AllenNLP's elmo command's input), not "
        "punctuation off words",
    )
    p.add_argument("--overwrite", action="store_true", help="replace OUTPUT_FILE instead of extending it")
    p.add_argument("--no_progress", action="store_true", help="no progress bars (loading, embedding)")
    p.set_defaults(output="all")

    def run(args):
        from .embed import ElmoEmbedder, check_output_outside_inputs, parse_scalar_mix_weights

        check_output_outside_inputs(args.output_file, args.model, [args.input_file, args.vocab_file])
        weights = parse_scalar_mix_weights(args.scalar_mix_weights) if args.scalar_mix_weights else None
        embedder = _load_embedder(args, ElmoEmbedder)
        if args.vocab_file:
            print(f"cached the token layer of {embedder.cache_vocabulary(args.vocab_file)} words", file=sys.stderr)
        done = embedder.embed_file(
            args.input_file,
            args.output_file,
            output=args.output,
            scalar_mix_weights=weights,
            batch_size=args.batch_size,
            overwrite=args.overwrite,
            progress=not args.no_progress,
            word_splitter="whitespace" if args.pretokenized else "treebank",
        )
        print(
            f"wrote {done['embedded']} sentences ({done['words']} words) to {args.output_file}"
            + (f"; {done['kept']} were already there" if done["kept"] else "")
        )

    p.set_defaults(func=run)


def _load_embedder(args, embedder_class):
    """`hf-ctx embed`'s model; `--no_progress` hides transformers' bar while it loads the weights too (for this
    load only: a Python caller of `main` keeps its own setting)."""
    from transformers.utils import logging as transformers_logging

    bars = transformers_logging.is_progress_bar_enabled()
    if args.no_progress:
        transformers_logging.disable_progress_bar()
    try:
        return embedder_class(args.model, device=args.device, dtype=args.dtype)
    finally:
        if bars:
            transformers_logging.enable_progress_bar()


class _DeprecatedCased(argparse.Action):
    """`--cased`, the old spelling of `--no_lowercase`: still accepted, with a warning."""

    def __call__(self, parser, namespace, values, option_string=None):
        warnings.warn(
            "--cased is deprecated; use --no_lowercase (the spelling of examples/pretrain_bert.py)",
            FutureWarning,
            stacklevel=2,
        )
        setattr(namespace, self.dest, False)


# Each model adds its subcommands here.
_SUBCOMMANDS = [_add_convert_bert, _add_train_tokenizer]
_SUBCOMMANDS += [_add_convert_elmo, _add_embed]


def package_version() -> str:
    """hf_ctx's `__version__`, read from `__init__.py` without importing the package (as setuptools reads it)."""
    tree = ast.parse(Path(__file__).parent.parent.joinpath("__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("hf_ctx/__init__.py defines no __version__")


def build_parser() -> argparse.ArgumentParser:
    parser = kinds.CheckedArgumentParser(prog="hf-ctx", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"hf_ctx {package_version()}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(subparsers)
    for subparser in subparsers.choices.values():  # `hf-ctx COMMAND ... --debug` works too
        subparser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback of an error"
        )
    return parser


# What an interrupted command leaves, and how to go on (`hf_ctx.tools.errors.interruptions_as_messages`).
AFTER_AN_INTERRUPTION = {
    "embed": "kept: the sentences embedded so far, in the output file; the same command (without --overwrite) "
    "goes on from there",
}
# embed --overwrite of an existing file writes the replacement beside it and renames it over the file only once
# whole: an interruption removes the replacement and keeps the old file as it was.
EMBED_OVERWRITE_INTERRUPTED = (
    "kept: the output file as it was before this run (its replacement, written beside it, was removed); "
    "run the same command again"
)
# The other commands write each file whole or not at all (hf_ctx.atomic_files).
NOTHING_WRITTEN = "kept: nothing of this run (its files are written whole or not at all); run the same command again"
DEBUG_ENV = "HF_CTX_DEBUG"


def _debug_from_environment() -> bool:
    from .errors import debug_from_environment  # imports the package: only where the variable is set

    return debug_from_environment()


def _is_nonempty_file(path) -> bool:
    """Whether `path` is a file with something in it (what embed --overwrite replaces rather than writes)."""
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except (ValueError, OSError) as error:  # a wrong option: one line, status 1 (as every error of the input)
        if "--debug" in argv or (DEBUG_ENV in os.environ and _debug_from_environment()):
            raise
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        raise SystemExit(1) from None
    from .errors import interruptions_as_messages, user_errors_as_messages

    go_on = AFTER_AN_INTERRUPTION.get(args.command, NOTHING_WRITTEN)
    if args.command == "embed" and args.overwrite and _is_nonempty_file(args.output_file):
        go_on = EMBED_OVERWRITE_INTERRUPTED
    interruptions = nullcontext() if args.debug else interruptions_as_messages(lambda interrupted: go_on)
    with interruptions, user_errors_as_messages(args.debug):
        return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
