"""The ``hf-ctx`` console script: one subcommand per task, each a thin wrapper over a library function."""

import argparse
import sys


def _add_convert_bert(subparsers):
    p = subparsers.add_parser("convert-bert", help="convert a transformers BERT checkpoint folder to hf_ctx")
    p.add_argument("src_dir", help="folder with config.json, weights and tokenizer files of a transformers BERT")
    p.add_argument("out_dir", help="where to write the hf_ctx checkpoint")
    p.add_argument("--weights_only", action="store_true",
                   help="convert the model alone (the source has no tokenizer files); a tokenizer in out_dir stays")

    def run(args):
        from .convert_bert import convert_bert_checkpoint

        convert_bert_checkpoint(args.src_dir, args.out_dir, weights_only=args.weights_only)
        print(f"wrote hf_ctx checkpoint to {args.out_dir}")

    p.set_defaults(func=run)


def _add_train_tokenizer(subparsers):
    p = subparsers.add_parser("train-tokenizer", help="train a WordPiece tokenizer from raw text files")
    p.add_argument("files", nargs="+", help="raw text files, one sentence or paragraph a line")
    p.add_argument("--output_dir", required=True)
    p.add_argument("--vocab_size", type=int, default=30522)
    p.add_argument("--min_frequency", type=int, default=2)
    p.add_argument("--cased", action="store_true", help="keep case (default: lower-case and strip accents)")
    p.add_argument("--model_max_length", type=int, default=512)

    def run(args):
        from .checks import check_output_dir
        from .tokenization_bert import train_wordpiece_tokenizer

        check_output_dir(args.output_dir)
        tokenizer = train_wordpiece_tokenizer(
            args.files,
            vocab_size=args.vocab_size,
            min_frequency=args.min_frequency,
            lowercase=not args.cased,
            model_max_length=args.model_max_length,
        )
        tokenizer.save_pretrained(args.output_dir)
        print(f"wrote a {len(tokenizer)}-token WordPiece tokenizer to {args.output_dir}")

    p.set_defaults(func=run)


def _add_convert_elmo(subparsers):
    p = subparsers.add_parser("convert-elmo", help="convert a published ELMo (bilm-tf options.json + weights.hdf5)")
    p.add_argument("options_json", help="the model's options.json")
    p.add_argument("weights_hdf5", help="the model's weights.hdf5")
    p.add_argument("output_dir", help="where to write the hf_ctx checkpoint (model and tokenizer)")
    p.add_argument("--vocab_file", help="bilm-tf vocab.txt, to give the tokenizer a word vocabulary")

    def run(args):
        from .convert_elmo import convert_elmo_checkpoint

        convert_elmo_checkpoint(args.options_json, args.weights_hdf5, args.output_dir, vocab_file=args.vocab_file)
        print(f"wrote hf_ctx ELMo checkpoint to {args.output_dir}")

    p.set_defaults(func=run)


# Each model adds its subcommands here.
_SUBCOMMANDS = [_add_convert_bert, _add_train_tokenizer]
_SUBCOMMANDS.append(_add_convert_elmo)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="hf-ctx", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in _SUBCOMMANDS:
        add(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
