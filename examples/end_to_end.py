#!/usr/bin/env python
"""The whole TagLM story in one command: pretrain a biLM, train a tagger on it, evaluate, save, reload, tag.

    python examples/end_to_end.py --output_dir runs/end_to_end

1. Data. Without `--train_file`, a small NER corpus is generated (`hf_ctx.data.synthetic_ner`: CoNLL-2003
   format in IOB1, names in validation/test that the tagged training data never shows, raw text that does).
2. A tiny ELMo biLM is pretrained on the raw text and the training sentences (`examples/pretrain_elmo.py`).
3. A TagLM tagger is trained on top of the frozen biLM (`examples/run_ner.py --model_type taglm`), and its
   entity-level F1 on the validation data is printed.
4. The saved tagger is reloaded through `AutoConfig`, `AutoModelForTokenClassification` and `AutoTokenizer`, and
   `pipeline("token-classification")` (with hf_ctx's word-level pipeline class) tags a sentence.

About a minute on 2 idle CPU cores with the defaults (47-84 s measured); each stage prints its expected
time as it starts. The same script takes real data:

    python examples/end_to_end.py --train_file eng.train --validation_file eng.testa \\
        --raw_text_file corpus.txt --bilm_epochs 1 --tagger_epochs 5 --output_dir runs/end_to_end_conll

Everything lands in `--output_dir`: `data/` (when generated), `bilm/`, `tagger/` (the checkpoint, with
`predictions_test.txt` when there is test data).
"""

from script_help import answer_help_at_once

answer_help_at_once(__name__, __file__)  # run with --help: the help at once, before torch and transformers load

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pretrain_elmo
import run_ner
from transformers import AutoConfig, AutoModelForTokenClassification, AutoTokenizer, pipeline

from hf_ctx import ElmoConfig, WordTokenClassificationPipeline
from hf_ctx.data.atomic_write import write_text
from hf_ctx.data.conll import read_conll
from hf_ctx.data.files import how_generated, mark_generated
from hf_ctx.data.synthetic_ner import generate_ner_corpus
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools import scripts
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.paths import prepare_output_dir

# A biLM small enough to pretrain in about a minute on a CPU: no clipping, so torch's fused LSTM runs it.
TINY_BILM = {
    "char_cnn": {"filters": [[1, 16], [2, 16], [3, 32], [4, 32]], "embedding": {"dim": 16}, "n_highway": 1},
    "lstm": {"dim": 128, "projection_dim": 64, "cell_clip": None, "proj_clip": None},
}
# How long each stage takes with the defaults on 2 idle CPU cores, printed as it starts so that a user on a slower or
# busier machine can tell slow from stuck. Measured on 2 idle cores in runs of 47-84 s in all
# (docs/performance.md#cpu-threads); on a busy machine expect more.
EXPECTED_TIME = {"data": "1 s", "bilm": "30-50 s", "tagger": "12-20 s", "reload": "2 s"}
# Names the generated training data never contains (held-out lists of synthetic_ner), in a familiar frame.
DEMO_SENTENCE = "Ingrid Okafor , who works for Falcon Steel , arrived in Oslo on Monday ."


@dataclass
class EndToEndArguments:
    output_dir: str = field(
        default="runs/end_to_end",
        metadata={"help": "where data, biLM and tagger are written", "kind": kinds.OUTPUT_FOLDER},
    )
    train_file: str | None = field(
        default=None, metadata={"help": "CoNLL training file (default: generated data)", "kind": kinds.EXISTING_FILE}
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "CoNLL validation file", "kind": kinds.EXISTING_FILE}
    )
    test_file: str | None = field(
        default=None, metadata={"help": "CoNLL test file (optional)", "kind": kinds.EXISTING_FILE}
    )
    raw_text_file: list[str] | None = field(
        default=None,
        metadata={
            "help": "raw text for the biLM, besides the training sentences (default: generated)",
            "kind": kinds.EXISTING_FILE,
        },
    )
    num_train_sentences: int = field(
        default=1500, metadata={"help": "generated data: tagged training sentences", "kind": kinds.COUNT}
    )
    num_eval_sentences: int = field(
        default=300,
        metadata={"help": "generated data: tagged sentences in each of validation and test", "kind": kinds.COUNT},
    )
    num_raw_sentences: int = field(
        default=6000, metadata={"help": "generated data: raw sentences for the biLM", "kind": kinds.COUNT}
    )
    bilm_config: str = field(
        default=json.dumps(TINY_BILM), metadata={"help": "JSON ElmoConfig overrides of the biLM", "kind": kinds.TEXT}
    )
    bilm_epochs: float = field(
        default=3.0, metadata={"help": "biLM pretraining epochs", "kind": kinds.POSITIVE_NUMBER}
    )
    tagger_epochs: float = field(
        default=4.0, metadata={"help": "TagLM training epochs", "kind": kinds.POSITIVE_NUMBER}
    )
    sentence: str = field(
        default=DEMO_SENTENCE, metadata={"help": "the sentence the reloaded pipeline tags", "kind": kinds.TEXT}
    )
    seed: int = field(default=42, metadata={"help": "random seed of every step", "kind": kinds.SEED})
    num_threads: int | None = field(
        default=None,
        metadata={
            "help": "CPU threads for training (default: one per core other processes leave free)",
            "kind": kinds.THREADS,
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "replace the biLM and tagger of an earlier run in --output_dir (else such a folder is refused)"
        },
    )


# The script's options (as `--help` shows them).
ARGUMENT_CLASSES = (EndToEndArguments,)


def training_flags(output_dir: Path, epochs: float, learning_rate: float, args: EndToEndArguments) -> list[str]:
    flags = {"output_dir": output_dir, "num_train_epochs": epochs, "learning_rate": learning_rate, "seed": args.seed}
    flags.update(per_device_train_batch_size=32, per_device_eval_batch_size=64, save_strategy="no", report_to="none")
    if args.num_threads is not None:
        flags["num_threads"] = args.num_threads
    overwrite = ["--overwrite_output_dir"] if args.overwrite_output_dir else []
    return [item for name, value in flags.items() for item in (f"--{name}", str(value))] + overwrite


def starting(stage: str, what: str) -> float:
    """Say what starts and how long it takes on 2 idle CPU cores; returns the start time."""
    print(f"... {what} (about {EXPECTED_TIME[stage]} on 2 idle CPU cores with the default settings)", flush=True)
    return time.perf_counter()


def main(argv: list[str] | None = None) -> dict:
    """The four stages in the order they run, each printing what it did; their work is in pretrain_elmo.py,
    run_ner.py and hf_ctx."""
    (args,) = scripts.parse_options(ARGUMENT_CLASSES, argv)
    check_options(args, argv)
    out = Path(args.output_dir)
    if not args.overwrite_output_dir:  # refused now, not after the biLM has trained
        for stage in ("bilm", "tagger"):
            prepare_output_dir(out / stage, resumable=False)
    train, validation, test, raw = prepare_data(args, out)
    bilm_metrics = pretrain_bilm(args, out, train, raw)
    metrics = train_tagger(args, out, train, validation, test)
    entities = tag_with_the_reloaded_tagger(out / "tagger", args.sentence)
    return {"bilm": bilm_metrics, "tagger": metrics, "entities": entities}


def check_options(args: EndToEndArguments, argv: list[str] | None) -> None:
    """Options the run would ignore are refused (the files of your data without --train_file, the generated data's
    sizes with it), and --bilm_config is checked as the biLM's config before anything trains."""
    if args.train_file is None:
        why = "without --train_file the run generates its data"
        scripts.refuse_unused_options(argv, ("validation_file", "test_file", "raw_text_file"), why)
    else:
        why = "they size the generated data, and --train_file brings yours"
        scripts.refuse_unused_options(argv, ("num_train_sentences", "num_eval_sentences", "num_raw_sentences"), why)
    overrides = scripts.parse_config_overrides(args.bilm_config, ElmoConfig, option="--bilm_config")
    try:
        ElmoConfig.from_preset("small", **overrides)  # pretrain_elmo.py's default size, which the run keeps
    except ValueError as error:
        raise ValueError(f"--bilm_config: {error}") from None


def prepare_data(args: EndToEndArguments, out: Path) -> tuple:
    """[1/4] (training, validation and test files, raw text files): the given ones, or a generated NER corpus."""
    started = starting("data", "preparing the data")
    if args.train_file is not None:
        if args.validation_file is None:
            raise ValueError("--train_file needs --validation_file (the tagger's F1 is measured on it)")
        train, validation, test = args.train_file, args.validation_file, args.test_file
        print(f"[1/4] data: {train}, {validation}" + (f", {test}" if test else ""))
        return train, validation, test, args.raw_text_file or []
    data = generate_ner_corpus(
        out / "data",
        num_train=args.num_train_sentences,
        num_validation=args.num_eval_sentences,
        num_test=args.num_eval_sentences,
        num_raw=args.num_raw_sentences,
        seed=args.seed,
    )
    print(f"[1/4] generated a NER corpus in {out / 'data'} ({time.perf_counter() - started:.0f} s)")
    return data["train"], data["validation"], data["test"], [data["raw"]]


def pretrain_bilm(args: EndToEndArguments, out: Path, train, raw: list) -> dict:
    """[2/4] The biLM, pretrained on the raw text plus the words of the training sentences (one sentence a line),
    into `out/bilm`; its metrics."""
    training_text = out / "bilm_training_text.txt"
    training_text.parent.mkdir(parents=True, exist_ok=True)
    write_text(training_text, "".join(" ".join(s["tokens"]) + "\n" for s in read_conll(train)))
    if how_generated(train):
        mark_generated(training_text, f"the sentences of {Path(train).name}, {how_generated(train)}")
    bilm_dir = out / "bilm"
    started = starting("bilm", "pretraining the biLM")
    metrics = pretrain_elmo.main(
        ["--train_file", *map(str, raw), str(training_text), "--validation_split_percentage", "5"]
        + ["--vocab_min_count", "1", "--config_overrides", args.bilm_config, "--do_train", "--do_eval"]
        + training_flags(bilm_dir, args.bilm_epochs, 3e-3, args)
    )
    print(
        f"[2/4] biLM pretrained: validation perplexity {metrics['eval_perplexity']:.2f} "
        f"(forward {metrics['eval_forward_perplexity']:.2f}, backward "
        f"{metrics['eval_backward_perplexity']:.2f}), saved in {bilm_dir} ({time.perf_counter() - started:.0f} s)"
    )
    return metrics


def train_tagger(args: EndToEndArguments, out: Path, train, validation, test) -> dict:
    """[3/4] TagLM on the frozen biLM of `out/bilm`, into `out/tagger`; its metrics."""
    tagger_dir = out / "tagger"
    data_flags = ["--train_file", str(train), "--validation_file", str(validation)]
    if test:
        data_flags += ["--test_file", str(test), "--do_predict"]
    started = starting("tagger", "training TagLM on the frozen biLM")
    metrics = run_ner.main(
        ["--model_type", "taglm", "--bilm_name_or_path", str(out / "bilm"), *data_flags, "--do_train", "--do_eval"]
        + training_flags(tagger_dir, args.tagger_epochs, 1e-2, args)
    )
    per_type = ", ".join(
        f"{k[5:-3]} {v:.3f}"
        for k, v in sorted(metrics.items())
        if k.endswith("_f1") and k.startswith("eval_") and k != "eval_f1"
    )
    corpus = "the generated corpus" if how_generated(train) else "the given corpus"
    test_f1 = f", test {metrics['predict_f1']:.4f}" if "predict_f1" in metrics else " (no test data)"
    print(
        f"[3/4] TagLM entity F1 on {corpus}: validation {metrics['eval_f1']:.4f} (precision "
        f"{metrics['eval_precision']:.4f}, recall {metrics['eval_recall']:.4f}; {per_type}){test_f1}; saved in "
        f"{tagger_dir} ({time.perf_counter() - started:.0f} s)"
    )
    return metrics


def tag_with_the_reloaded_tagger(tagger_dir: Path, sentence: str) -> list[dict]:
    """[4/4] The tagger reloaded through the Auto classes, tagging `sentence` as a pipeline; its entities."""
    started = starting("reload", "reloading the tagger through the Auto classes and tagging a sentence")
    config = AutoConfig.from_pretrained(tagger_dir)
    model = AutoModelForTokenClassification.from_pretrained(tagger_dir)
    tokenizer = AutoTokenizer.from_pretrained(tagger_dir)
    tagger = pipeline(
        "token-classification",
        model=model,
        tokenizer=tokenizer,
        pipeline_class=WordTokenClassificationPipeline,
        aggregation_strategy="simple",
    )
    entities = tagger(sentence)
    print(
        f"[4/4] reloaded {type(config).__name__} / {type(model).__name__} / {type(tokenizer).__name__}; "
        f'pipeline("token-classification") on "{sentence}" ({time.perf_counter() - started:.0f} s):'
    )
    for entity in entities:
        print(
            f"    {entity['entity_group']:5} {entity['word']!r} (characters {entity['start']}-{entity['end']}, "
            f"score {entity['score']:.2f})"
        )
    return entities


if __name__ == "__main__":
    run_script(main)
