"""examples/pretrain_bert.py end to end on a tiny generated corpus: checkpoint, metrics, model card, push to the
Hub (mocked), exact resume, 2 processes."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import pretrain_bert
import torch
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from accelerate.utils.launch import prepare_multi_gpu_env
from hub_server import TOKEN, folder_files
from huggingface_hub import ModelCard, metadata_load
from huggingface_hub.repocard_data import model_index_to_eval_results
from safetensors.torch import load_file
from tiny_checkpoints import WORDS as TINY_WORDS
from tiny_checkpoints import _bert_config, bert_token_classifier, bert_tokenizer
from transformers import AutoModelForPreTraining, AutoTokenizer

from hf_ctx import CtxBertConfig, CtxBertForMaskedLM, CtxBertForPreTraining, modeling_bert
from hf_ctx.data.masking import DataCollatorForPretraining, add_fixed_masks
from hf_ctx.data.pretraining import build_pretraining_dataset
from hf_ctx.data.text import load_text_documents

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pretrain_bert.py"
ACCELERATE_CONFIGS = EXAMPLE.parent / "accelerate"
WORDS = "the a cat dog bird fish red green blue small big old runs sleeps eats sees near under house tree".split()
STEPS = 6


def write_corpus(path, num_documents, rng):
    documents = [
        "\n".join(" ".join(rng.choice(WORDS, int(rng.integers(4, 12)))) + " ." for _ in range(int(rng.integers(2, 8))))
        for _ in range(num_documents)
    ]
    path.write_text("\n\n".join(documents) + "\n")
    return str(path)


def common_args(corpus, output_dir, tokenizer=None):
    # No dropout, so that one process and two processes compute the same function. The validation file only where
    # a test evaluates (`with_validation`): a run that does not evaluate refuses one. A tokenizer trained here of
    # 120 pieces, or `tokenizer`'s folder.
    return [
        "--train_file",
        corpus["train"],
        "--cache_dir",
        corpus["cache"],
        "--model_size",
        "tiny",
        *(["--vocab_size", "120"] if tokenizer is None else ["--tokenizer_name", str(tokenizer)]),
        "--max_seq_length",
        "32",
        "--config_overrides",
        "hidden_dropout_prob=0,attention_probs_dropout_prob=0",
        "--do_train",
        "--max_steps",
        str(STEPS),
        "--learning_rate",
        "1e-3",
        "--logging_steps",
        "1",
        "--seed",
        "0",
        "--use_cpu",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(output_dir),
    ]


def logged_losses(output_dir):
    history = json.loads((Path(output_dir) / "trainer_state.json").read_text())["log_history"]
    return {entry["step"]: entry["loss"] for entry in history if "loss" in entry}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    return {
        "train": write_corpus(root / "train.txt", 150, rng),
        "valid": write_corpus(root / "valid.txt", 30, rng),
        "cache": str(root / "cache"),
    }


@pytest.fixture(scope="module")
def single_run(corpus, tmp_path_factory):
    """One process, batch 8, checkpoints at steps 3 and 6, evaluated at the end."""
    output_dir = tmp_path_factory.mktemp("single")
    args = common_args(corpus, output_dir) + ["--per_device_train_batch_size", "8", "--save_steps", "3", "--do_eval"]
    args += ["--validation_file", corpus["valid"]]
    metrics = pretrain_bert.main(args)
    return output_dir, metrics


def test_checkpoint_reloads_and_reported_metrics_are_right(single_run, corpus):
    output_dir, metrics = single_run
    model = AutoModelForPreTraining.from_pretrained(output_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    assert isinstance(model, CtxBertForPreTraining) and model.config.vocab_size == len(tokenizer)
    assert model.config.unpad_inputs and model.config.sparse_prediction  # the fast paths, saved with the model
    final = load_file(output_dir / f"checkpoint-{STEPS}" / "model.safetensors")
    assert all(torch.equal(final[name], value) for name, value in load_file(output_dir / "model.safetensors").items())
    losses = logged_losses(output_dir)
    assert sorted(losses) == list(range(1, STEPS + 1)) and all(math.isfinite(v) for v in losses.values())

    # Recompute the reported validation metrics with the reloaded model, one example at a time, dense logits.
    documents = load_text_documents([corpus["valid"]], cache_dir=corpus["cache"])
    examples = build_pretraining_dataset(documents, tokenizer, max_seq_length=32, seed=0)
    examples = add_fixed_masks(examples, DataCollatorForPretraining(tokenizer, seed=0))
    model.config.sparse_prediction = False
    nll, correct, masked, nsp_correct = 0.0, 0, 0, 0
    with torch.no_grad():
        for example in examples:
            inputs = {k: torch.tensor([example[k]]) for k in ("input_ids", "token_type_ids")}
            output = model(**inputs)
            labels = torch.tensor(example["labels"])
            chosen = labels != -100
            log_probs = torch.log_softmax(output.prediction_logits[0][chosen].double(), -1)
            nll -= log_probs.gather(1, labels[chosen][:, None]).sum().item()
            correct += (log_probs.argmax(-1) == labels[chosen]).sum().item()
            masked += int(chosen.sum())
            nsp_correct += int(output.seq_relationship_logits[0].argmax() == example["next_sentence_label"])
    assert metrics["eval_mlm_perplexity"] == pytest.approx(math.exp(nll / masked), rel=1e-4)
    assert metrics["eval_mlm_accuracy"] == pytest.approx(correct / masked, abs=1e-6)
    assert metrics["eval_nsp_accuracy"] == pytest.approx(nsp_correct / len(examples), abs=1e-6)


def test_model_card_reports_the_run(single_run, corpus):
    """finish_run wrote README.md: metadata huggingface_hub parses, the evaluation the run reported, the settings."""
    output_dir, metrics = single_run
    metadata = metadata_load(output_dir / "README.md")
    card = ModelCard.load(output_dir / "README.md")  # parses model-index into EvalResults, raising on bad ones
    assert metadata["library_name"] == "transformers" and metadata["pipeline_tag"] == "fill-mask"
    assert {"hf_ctx", "bert"} <= set(metadata["tags"])
    assert "datasets" not in metadata  # local text files have no Hub id
    model_name, results = model_index_to_eval_results(metadata["model-index"])
    assert model_name == output_dir.name  # no --hub_model_id: the output folder's name
    assert card.data.eval_results == results
    reported = {
        "mlm_accuracy": "Masked-LM accuracy",
        "mlm_perplexity": "Masked-LM perplexity",
        "nsp_accuracy": "Next-sentence accuracy",
    }
    assert sorted(metadata["metrics"]) == sorted(reported)
    assert {(r.metric_type, r.metric_value, r.dataset_split) for r in results} == {
        (metric, round(metrics[f"eval_{metric}"], 4), "validation") for metric in reported
    }
    for metric, name in reported.items():
        assert f"| validation | {name} | {round(metrics[f'eval_{metric}'], 4)} |" in card.text
    # The card names the evaluation files, not the training files, in its text and its model-index.
    assert "Measured on valid.txt by the script" in card.text
    assert {(r.dataset_name, r.dataset_type) for r in results} == {("valid.txt", "valid.txt")}
    assert "## Training data\n\nthe local file train.txt" in card.text
    assert "Pretrained from scratch on the local file train.txt" in card.text
    vocab_size = len(AutoTokenizer.from_pretrained(output_dir))
    for row in [
        "| model_size | tiny |",
        "| objective | mlm_nsp |",
        "| max_seq_length | 32 |",
        "| mlm_probability | 0.15 |",
        "| whole_word_mask | False |",
        f"| tokenizer | {vocab_size} WordPiece tokens, trained here from the training text (--vocab_size 120: the "
        "text has fewer distinct pieces) |",
        "| learning_rate | 0.001 |",
        "| optimizer | AdamW (PyTorch, fused), betas (0.9, 0.999), epsilon 1e-08, weight decay 0 |",
    ]:
        assert row in card.text, row
    # The objective that ran, and no other; the training loss as logged (no evaluation during training).
    assert "BERT's two objectives on sentence pairs" in card.text and "masked language modelling only" not in card.text
    assert re.search(r"### Training results\n\n\| Step +\| Epoch +\| Training Loss +\|", card.text)


def test_push_to_hub_uploads_the_checkpoints_and_at_the_end_the_model_and_its_card(single_run, corpus, tmp_path, hub):
    """--push_to_hub --hub_strategy every_save, to the Hub over HTTP: checkpoint pushes while training, then one at
    the end; the repository ends with what save_pretrained wrote and the card, without training state."""
    output_dir, _ = single_run
    args = common_args(corpus, tmp_path, tokenizer=output_dir) + [
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "8",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--push_to_hub",
        "--hub_model_id",
        "me/bert-tiny",
        "--hub_strategy",
        "every_save",
        "--hub_token",
        TOKEN,
    ]
    pretrain_bert.main(args)
    assert hub.created == ["me/bert-tiny"]
    summaries = [commit["summary"] for commit in hub.commits]
    assert summaries[0].startswith("Training in progress") and summaries[-1] == "End of training", summaries
    saved, pushed = folder_files(tmp_path), hub.files("me/bert-tiny")
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", "modeling_bert.py"} <= set(pushed)
    assert all(saved[name] == content for name, content in pushed.items() if name != ".gitattributes")
    assert "me/bert-tiny" in saved["README.md"].decode()
    assert not any(TOKEN.encode() in content for commit in hub.commits for content in commit["files"].values())
    # (hf_home: the test's Hub client's own folder)
    kept_local = {name for name in set(saved) - set(pushed) if not name.startswith(("checkpoint-", "hf_home/"))}
    assert kept_local == {
        ".hf_ctx-lock",  # the run's writer lock (hf_ctx.tools.output_files.lock_output)
        "training_args.bin",
        "trainer_state.json",
        "train_results.json",
        "all_results.json",
    }


def test_resume_from_checkpoint_continues_exactly(single_run, corpus, tmp_path):
    output_dir, _ = single_run
    args = common_args(corpus, tmp_path) + [
        "--per_device_train_batch_size",
        "8",
        "--save_strategy",
        "no",
        "--resume_from_checkpoint",
        str(output_dir / "checkpoint-3"),
        *("--validation_file", corpus["valid"], "--do_eval"),  # as the run it resumes (evaluated at its end)
    ]
    metrics = pretrain_bert.main(args)
    resumed, original = logged_losses(tmp_path), logged_losses(output_dir)
    assert resumed == original  # steps 1-3 come with the checkpoint, 4-6 are trained again
    # The train loss of this call covers steps 4-6 only: it did resume rather than train from step 1 again.
    assert metrics["train_loss"] == pytest.approx(np.mean([original[step] for step in (4, 5, 6)]), rel=1e-3)
    assert metrics["train_loss"] != pytest.approx(np.mean(list(original.values())), rel=1e-3)
    weights, expected = load_file(tmp_path / "model.safetensors"), load_file(output_dir / "model.safetensors")
    assert all(torch.equal(weights[name], expected[name]) for name in expected)


@pytest.mark.slow
def test_two_cpu_processes_train_like_one_with_the_same_global_batch(single_run, corpus, tmp_path):
    """torchrun, 2 processes (gloo) x batch 4 against 1 process x batch 8.

    Same data order, same masks (seeded per example), same initial weights. The only difference: DDP averages the
    two processes' mean losses, while one process averages over all masked tokens of the batch, so the MLM loss
    weights tokens slightly differently when the processes hold different numbers of masked tokens. Hence a
    tolerance: 1e-3 relative on the first step (same weights), 1% afterwards; training on other data or other
    masks moves the loss by several percent a step here.
    """
    output_dir, _ = single_run
    args = common_args(corpus, tmp_path, tokenizer=output_dir) + [
        "--per_device_train_batch_size",
        "4",
        "--save_strategy",
        "no",
        *("--validation_file", corpus["valid"], "--do_eval"),  # as the one-process run (evaluated at its end)
    ]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(EXAMPLE)]
    result = subprocess.run(
        command + args, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "process 0 of 2" in result.stdout + result.stderr
    two, one = logged_losses(tmp_path), logged_losses(output_dir)
    assert sorted(two) == sorted(one)
    assert two[1] == pytest.approx(one[1], rel=1e-3)
    for step in one:
        assert two[step] == pytest.approx(one[step], rel=0.01), (step, two, one)


@pytest.mark.parametrize("name, distributed_type", [("multi_gpu", "MULTI_GPU"), ("fsdp", "FSDP"), ("tpu", "XLA")])
def test_accelerate_configs_are_accepted(name, distributed_type):
    path = str(ACCELERATE_CONFIGS / f"{name}.yaml")
    config = load_config_from_file(path)  # accelerate's config class: rejects unknown keys and types
    assert config.distributed_type == DistributedType(distributed_type) and config.num_processes > 1
    # What `accelerate launch --config_file` makes of the file (the launcher's own validation step).
    parser = launch_command_parser()
    args, _, _ = _validate_launch_command(parser.parse_args(["--config_file", path, str(EXAMPLE)]))
    assert (args.multi_gpu, args.use_fsdp, args.tpu) == (name == "multi_gpu", name == "fsdp", name == "tpu")
    if name == "fsdp":
        assert set(config.fsdp_config) <= set(vars(parser.parse_args([str(EXAMPLE)])))  # all are launcher options
        with mock.patch.dict(os.environ, prepare_multi_gpu_env(args)):
            plugin = FullyShardedDataParallelPlugin()  # reads and checks the FSDP_* variables the launcher sets
        assert plugin.fsdp_version == 2 and plugin.transformer_cls_names_to_wrap == ["CtxBertLayer"]
        assert hasattr(modeling_bert, "CtxBertLayer")


def test_mlm_only_from_a_local_dataset_with_a_config_file(tmp_path):
    """--dataset_name (a local folder here; a Hub name online), --config_name, packed MLM-only, whole words."""
    rng = np.random.default_rng(1)
    data = tmp_path / "data"
    data.mkdir()
    for split, rows in [("train", 80), ("validation", 16)]:
        with open(data / f"{split}.jsonl", "w") as f:
            for _ in range(rows):
                text = "\n".join(" ".join(rng.choice(WORDS, 8)) for _ in range(3))
                f.write(json.dumps({"content": text}) + "\n")
    CtxBertConfig.from_preset("tiny", vocab_size=100, max_position_embeddings=64).save_pretrained(tmp_path / "config")
    output_dir = tmp_path / "run"
    metrics = pretrain_bert.main(
        [
            "--dataset_name",
            str(data),
            "--text_column",
            "content",
            "--cache_dir",
            str(tmp_path / "cache"),
            "--config_name",
            str(tmp_path / "config"),
            "--config_overrides",
            "pre_layer_norm=true",
            "--objective",
            "mlm",
            "--whole_word_mask",
            "--pad_to_multiple_of",
            "8",
            "--vocab_size",
            "100",
            "--max_seq_length",
            "64",
            "--do_train",
            "--do_eval",
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "8",
            "--use_cpu",
            "--disable_tqdm",
            "true",
            "--output_dir",
            str(output_dir),
        ]
    )
    assert {"eval_mlm_accuracy", "eval_mlm_perplexity"} <= set(metrics) and "eval_nsp_accuracy" not in metrics
    model = AutoModelForPreTraining.from_pretrained(output_dir)
    assert model.config.pre_layer_norm and model.config.max_position_embeddings == 64
    assert AutoTokenizer.from_pretrained(output_dir).model_max_length == 64
    card = " ".join((output_dir / "README.md").read_text().split())
    assert "masked language modelling only; the checkpoint's next-sentence head was not trained" in card
    # A dataset saved to disk is named by its folder, never by its local path; evaluation on its validation split.
    assert str(tmp_path) not in card and f"Measured on {data.name} (" not in card
    assert f"Measured on {data.name} by the script" in card


def test_few_is_next_pairs_are_a_warning(caplog):
    """Documents of one segment make only NotNext pairs: below 40% IsNext (label 0) the run says so."""
    from datasets import Dataset

    example = pretrain_bert
    few_is_next = Dataset.from_dict({"next_sentence_label": [0, 1, 1, 1]})
    with caplog.at_level("WARNING"):
        assert example.warn_if_few_is_next_pairs(few_is_next, split_sentences=False) == 0.25
    assert "only 25.0% of the 4 next-sentence training pairs are IsNext" in caplog.text
    assert "--split_sentences cuts it" in caplog.text
    caplog.clear()
    # The advice fits what the user passed: never --split_sentences to a run that already has it.
    with caplog.at_level("WARNING"):
        example.warn_if_few_is_next_pairs(few_is_next, split_sentences=True)
    assert "only 25.0%" in caplog.text and "already cut into sentences" in caplog.text
    assert "--split_sentences cuts" not in caplog.text and "--objective mlm" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        example.warn_if_few_is_next_pairs(Dataset.from_dict({"next_sentence_label": [0, 1, 0, 1, 1]}), False)
    assert caplog.text == ""


def test_one_document_without_blank_lines_suggests_document_boundary_line(tmp_path):
    """Without a validation file, 5% of one document cannot be held out: the error says why and what to pass."""
    (tmp_path / "articles.txt").write_text("".join(f"article {i} has words .\n" for i in range(40)))
    with pytest.raises(
        ValueError,
        match=r"holds out 1 of the 1 training example\(s\), leaving none to train on.*"
        r"without blank lines is one document.*--document_boundary line",
    ):
        pretrain_bert.main(
            [
                "--train_file",
                str(tmp_path / "articles.txt"),
                "--do_train",
                "--vocab_size",
                "60",
                "--output_dir",
                str(tmp_path / "out"),
                "--use_cpu",
                "--report_to",
                "none",
            ]
        )


@pytest.mark.parametrize("steps", [[], ["--do_predict"]])
def test_a_run_without_a_step_is_refused(tmp_path, steps):
    """Without --do_train it exited 0 having written only a tokenizer."""
    (tmp_path / "text.txt").write_text("a cat runs .\n\na dog sleeps .\n")
    arguments = ["--train_file", str(tmp_path / "text.txt"), "--output_dir", str(tmp_path / "out"), *steps]
    with pytest.raises(ValueError, match="nothing to do: give --do_train and/or --do_eval"):
        pretrain_bert.main([*arguments, "--use_cpu", "--report_to", "none"])
    assert not (tmp_path / "out").exists()


def test_config_name_takes_a_size_preset_as_every_script_does():
    from types import SimpleNamespace

    from hf_ctx import BERT_PRESETS

    args = SimpleNamespace(
        model_name_or_path=None, config_name="tiny", model_size="mini", sparse_prediction=True, unpad_inputs=True,
        config_overrides="num_hidden_layers=1",
    )  # fmt: skip

    class Tokenizer:
        pad_token_id = 0

        def __len__(self):
            return 100

    config = pretrain_bert.build_model(args, Tokenizer())[0].config
    assert config.hidden_size == BERT_PRESETS["tiny"]["hidden_size"] and config.num_hidden_layers == 1
    assert config.vocab_size == 100


def test_pretokenized_examples_train_exactly_as_the_text_they_came_from(single_run, corpus, tmp_path):
    """--pretokenized_dir (token-id arrays written by save_pretokenized) gives the same examples and the same
    training losses as the text files with the same tokenizer; a mismatched length or objective is refused."""
    from hf_ctx.data.pretraining import load_pretokenized, save_pretokenized

    tokenizer = AutoTokenizer.from_pretrained(single_run[0])
    built = {
        split: build_pretraining_dataset(corpus[name], tokenizer, objective="mlm", max_seq_length=32)
        for split, name in (("train", "train"), ("validation", "valid"))
    }
    summary = save_pretokenized(tmp_path / "ids", tokenizer, built, max_seq_length=32, sources=["train.txt"])
    assert summary["splits"]["train"]["examples"] == len(built["train"])
    assert np.load(tmp_path / "ids" / "train.input_ids.npy").dtype == np.uint16
    loaded = load_pretokenized(tmp_path / "ids", "train", 32)
    assert loaded["input_ids"] == built["train"]["input_ids"]
    assert loaded["token_type_ids"] == built["train"]["token_type_ids"]
    with pytest.raises(ValueError, match="packed to max_seq_length 32, not the --max_seq_length 64"):
        load_pretokenized(tmp_path / "ids", "train", 64)
    with pytest.raises(FileNotFoundError, match="no pre-tokenized test examples"):
        load_pretokenized(tmp_path / "ids", "test", 32)
    shutil.copytree(tmp_path / "ids", tmp_path / "cut")
    offsets = np.load(tmp_path / "cut" / "train.offsets.npy")
    np.save(tmp_path / "cut" / "train.offsets.npy", offsets[:-1])  # the last example's end lost
    with pytest.raises(ValueError, match=r"train.offsets.npy: offsets must rise from 0 to the [\d,]+ ids"):
        load_pretokenized(tmp_path / "cut", "train", 32)

    def run(output_dir, data):
        args = common_args(corpus, output_dir)
        args = [a for i, a in enumerate(args) if a not in data["drop"] and args[i - 1] not in data["drop"]]
        pretrain_bert.main(args + ["--objective", "mlm", "--do_eval", *data["add"]])
        return logged_losses(output_dir)

    text = {
        "drop": {"--vocab_size"},
        "add": ["--tokenizer_name", str(single_run[0]), "--validation_file", corpus["valid"]],
    }
    ids = {
        "drop": {"--vocab_size", "--train_file", "--validation_file"},
        "add": ["--pretokenized_dir", str(tmp_path / "ids")],
    }
    assert run(tmp_path / "ids_run", ids) == run(tmp_path / "text_run", text)
    args = common_args(corpus, tmp_path / "refused")
    del args[args.index("--vocab_size") : args.index("--vocab_size") + 2]  # refused with a tokenizer brought
    with pytest.raises(ValueError, match="--pretokenized_dir brings the text and its tokenizer: drop --train_file"):
        pretrain_bert.main([*args, "--objective", "mlm", "--pretokenized_dir", str(tmp_path / "ids")])
    (tmp_path / "empty").mkdir()  # before: the tokenizer's "sentencepiece or tiktoken" error, naming no file
    with pytest.raises(FileNotFoundError, match=r"pretokenized.json not found: .*empty is not a pre-tokenized corpus"):
        pretrain_bert.main([*args[2:], "--objective", "mlm", "--pretokenized_dir", str(tmp_path / "empty")])


# --- continued pretraining on a task's own text --------------------------------------------------------------


def continued_args(checkpoint, train_file, output_dir, cache_dir, steps=3):
    """pretrain_bert.py continuing `checkpoint` for `steps` steps on `train_file`, keeping its tokenizer."""
    return (
        ["--model_name_or_path", str(checkpoint), "--train_file", train_file, "--cache_dir", cache_dir]
        + ["--max_seq_length", "32", "--do_train", "--max_steps", str(steps), "--per_device_train_batch_size", "8"]
        + ["--learning_rate", "1e-3", "--seed", "0", "--use_cpu", "--disable_tqdm", "true", "--report_to", "none"]
        + ["--save_strategy", "no", "--output_dir", str(output_dir)]
    )


def test_continued_pretraining_changes_the_weights_and_keeps_the_vocabulary(single_run, corpus, tmp_path):
    checkpoint, _ = single_run
    task_text = write_corpus(tmp_path / "task_text.txt", 40, np.random.default_rng(7))
    arguments = continued_args(checkpoint, task_text, tmp_path / "continued", corpus["cache"])
    pretrain_bert.main([*arguments, "--objective", "mlm"])
    output = tmp_path / "continued"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (output / name).read_bytes() == (checkpoint / name).read_bytes(), name
    config, start = (AutoModelForPreTraining.from_pretrained(folder).config for folder in (output, checkpoint))
    assert config.vocab_size == start.vocab_size == len(AutoTokenizer.from_pretrained(output))
    before, after = load_file(checkpoint / "model.safetensors"), load_file(output / "model.safetensors")
    assert before.keys() == after.keys()
    layers = [name for name in before if ".encoder.layer." in name]
    assert layers and all(not torch.equal(before[name], after[name]) for name in layers)
    assert not torch.equal(
        before["bert.embeddings.word_embeddings.weight"], after["bert.embeddings.word_embeddings.weight"]
    )
    card = (output / "README.md").read_text()
    assert f"Pretraining continued from `{checkpoint.name}` on the local file task_text.txt" in card
    assert f"| Starting point | `{checkpoint.name}`, trained by hf_ctx from random initialisation" in card
    assert "Created here" not in card
    # What ran, and only that: MLM alone, the checkpoint's tokenizer, the loss of a run that did not evaluate.
    assert "masked language modelling only" in card and "two objectives" not in card
    tokens = len(AutoTokenizer.from_pretrained(output))
    assert f"| tokenizer | {tokens} WordPiece tokens, from `{checkpoint.name}` (the checkpoint continued) |" in card
    assert re.search(r"\| Step +\| Epoch +\| Training Loss +\|", card) and "training_curves.png" in card
    assert (output / "training_curves.png").stat().st_size > 0


def masked_lm(folder):
    tokenizer = bert_tokenizer(folder)
    return CtxBertForMaskedLM(_bert_config(tokenizer)), tokenizer


MLM_HEAD = ["cls.predictions.LayerNorm", "cls.predictions.decoder", "cls.predictions.dense"]


@pytest.mark.parametrize(
    "build, created_modules",
    [
        (bert_token_classifier, ["bert.pooler.dense", *MLM_HEAD, "cls.seq_relationship"]),  # no [CLS] pooler
        (masked_lm, ["bert.pooler.dense", "cls.seq_relationship"]),  # its MLM head is kept
    ],
    ids=["tagger", "masked_lm"],
)
def test_a_model_without_pretraining_heads_continues_with_new_ones(tmp_path, caplog, build, created_modules):
    """A fine-tuned tagger's folder, a masked LM's: what they hold is loaded as it is, the pretraining heads they
    lack are created, and the log and card say which."""
    from types import SimpleNamespace

    start, tokenizer = build(tmp_path)
    start.save_pretrained(tmp_path / "start")
    tokenizer.save_pretrained(tmp_path / "start")
    config = pretrain_bert.load_pretraining_config(tmp_path / "start", "bert")
    model_args = SimpleNamespace(model_name_or_path=str(tmp_path / "start"), tokenizer_name=None)
    model, created = pretrain_bert.build_model(model_args, tokenizer, config)
    assert created == [f"`{name}`: random initialisation" for name in created_modules]
    held, loaded = start.state_dict(), model.state_dict()
    kept = [name for name in held if name in loaded]
    assert any(name.startswith("bert.encoder.") for name in kept)
    assert any(name.startswith("cls.predictions.dense") for name in kept) == (build is masked_lm)
    assert all(torch.equal(held[name], loaded[name]) for name in kept)

    rng = np.random.default_rng(0)
    text = tmp_path / "task_text.txt"
    sentences = (" ".join(rng.choice(TINY_WORDS, 6)) for _ in range(90))
    text.write_text("\n\n".join("\n".join(next(sentences) for _ in range(3)) for _ in range(30)))
    pretrain_bert.main(continued_args(tmp_path / "start", str(text), tmp_path / "out", str(tmp_path / "cache"), 2))
    assert f"{tmp_path / 'start'} has no weights for {', '.join(created_modules)}: created" in caplog.text
    card = (tmp_path / "out" / "README.md").read_text()
    assert f"| Created here, not in the starting point | `{created_modules[0]}`: random initialisation; " in card
    assert (tmp_path / "out" / "tokenizer.json").read_bytes() == (tmp_path / "start" / "tokenizer.json").read_bytes()


def test_a_checkpoint_of_another_family_is_refused_before_any_text_is_read(tmp_path):
    from tiny_checkpoints import elmo_bilm

    model, _ = elmo_bilm(tmp_path)
    model.save_pretrained(tmp_path / "elmo")
    (tmp_path / "unread.txt").write_text("junk\n")  # there, so that its kind holds; never read
    arguments = ["--model_name_or_path", str(tmp_path / "elmo"), "--train_file", str(tmp_path / "unread.txt")]
    with pytest.raises(ValueError, match="is a 'hf_ctx_elmo' checkpoint; this script continues the pretraining of hf"):
        pretrain_bert.main([*arguments, "--do_train", "--output_dir", str(tmp_path / "out")])


def test_tokenizer_training_options_are_refused_where_the_tokenizer_comes_from_elsewhere(single_run, corpus, tmp_path):
    """--vocab_size (and --lowercase, --tokenizer_train_samples) shape the tokenizer trained here: with
    --tokenizer_name or --model_name_or_path they did nothing, silently; now refused in one line, before any text is
    read. (A resumed run's command gives them again and is not refused: the checkpoint holds what they made.)"""
    output_dir, _ = single_run
    base = ["--train_file", corpus["train"], "--do_train", "--max_steps", "1", "--use_cpu", "--report_to", "none"]
    for source in ("--tokenizer_name", "--model_name_or_path"):
        argv = [*base, source, str(output_dir), "--vocab_size", "50", "--output_dir", str(tmp_path / source[2:])]
        with pytest.raises(
            ValueError, match=rf"^--vocab_size would do nothing here: .*is {output_dir}'s; leave it out$"
        ):
            pretrain_bert.main(argv)
