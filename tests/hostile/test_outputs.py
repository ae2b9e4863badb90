"""Outputs a user relies on: nothing silently wrong, nothing lost. An output being replaced is replaced only once
the new one is whole; a text longer than a model's window is tagged to its end; a batched pipeline call equals the
single calls; a loss over tokens is normalised over the whole accumulated batch; the predictions of a text file
align with its lines. Each case is a function named after what it tries."""

import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch
from tiny_checkpoints import elmo_bilm

from hf_ctx import ElmoConfig


@pytest.fixture(scope="module")
def elmo_folder(tmp_path_factory):
    """A tiny ELMo biLM checkpoint that reads sentences of at most 12 words."""
    root = tmp_path_factory.mktemp("elmo")
    model, tokenizer = elmo_bilm(root)
    config = ElmoConfig.from_dict({**model.config.to_dict(), "max_sentence_words": 12})
    type(model)(config).save_pretrained(root / "elmo")
    tokenizer.save_pretrained(root / "elmo")
    return root / "elmo"


def hf_ctx_cli(*arguments, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "hf_ctx.tools.cli", *map(str, arguments)], capture_output=True, text=True, cwd=cwd
    )


def test_embed_overwrite_failing_on_a_too_long_line_keeps_the_old_file(elmo_folder, tmp_path):
    """The issue's case: `hf-ctx embed --overwrite` whose new input has a line over the model's limit left 0 of
    the previous file's datasets. Now the line is refused before anything is written, and the old file stays."""
    from hf_ctx.tools.embed import ElmoEmbedder

    old_text, output = tmp_path / "old.txt", tmp_path / "vectors.hdf5"
    old_text.write_text("".join(f"red cat {i}\n" for i in range(21)))
    ElmoEmbedder(str(elmo_folder), device="cpu").embed_file(old_text, output, progress=False)
    before = output.read_bytes()
    new_text = tmp_path / "new.txt"
    new_text.write_text("red cat\n" + "cat " * 13 + "\nblue dog\n")
    run = hf_ctx_cli("embed", elmo_folder, new_text, output, "--overwrite", "--no_progress")
    assert run.returncode == 1
    assert "new.txt:2: 13 words, more than this ELMo's max_sentence_words=12" in run.stderr
    assert "Traceback" not in run.stderr
    assert output.read_bytes() == before
    with h5py.File(output, "r") as f:
        assert len([key for key in f if key.isdigit()]) == 21


def test_embed_overwrite_failing_half_way_keeps_the_old_file_and_leaves_no_temporary(
    elmo_folder, tmp_path, monkeypatch
):
    """A failure the input check cannot see (here the model raising on the third batch) keeps the old file whole,
    and no temporary is left beside it."""
    from hf_ctx.tools.embed import ElmoEmbedder

    old_text, output = tmp_path / "old.txt", tmp_path / "vectors.hdf5"
    old_text.write_text("".join(f"red cat {i}\n" for i in range(21)))
    embedder = ElmoEmbedder(str(elmo_folder), device="cpu")
    embedder.embed_file(old_text, output, progress=False)
    before = output.read_bytes()
    calls = []
    real = embedder.embed_batch

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("out of memory")
        return real(*args, **kwargs)

    monkeypatch.setattr(embedder, "embed_batch", failing)
    new_text = tmp_path / "new.txt"
    new_text.write_text("".join(f"blue dog {i}\n" for i in range(10)))
    with pytest.raises(RuntimeError, match="out of memory"):
        embedder.embed_file(new_text, output, overwrite=True, batch_size=2, progress=False)
    assert output.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["new.txt", "old.txt", "vectors.hdf5"]
    # and a replacement that completes is the new text's vectors, whole
    monkeypatch.undo()
    assert embedder.embed_file(new_text, output, overwrite=True, progress=False)["embedded"] == 10
    with h5py.File(output, "r") as f:
        assert sorted(int(key) for key in f if key.isdigit()) == list(range(10))
        assert f["3"].attrs["sentence"] == "blue dog 3"


# --- gradient accumulation: the big batch ---------------------------------------------------------------------

# Eight sentences of very unequal lengths: micro-batches of 4 hold unequal token counts, so a mean per micro-batch
# (the old losses) weighs a token of the short micro-batch more than one of the long.
ACCUMULATION_SENTENCES = [
    "red cat",
    "green dog runs fast",
    "blue bird",
    "cat",
    "red green blue cat dog bird runs sleeps eats fast slow red",
    "dog eats slow",
    "bird sleeps red green blue cat dog",
    "fast cat runs",
]


def _no_dropout(config):
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "classifier_dropout"):
        if hasattr(config, name) and getattr(config, name) is not None:
            setattr(config, name, 0.0)
    if hasattr(config, "bilm_state_norm"):
        config.bilm_state_norm = "none"  # "center" uses each batch's statistics, as batch norm does
    return config


def _bert_rows(tmp_path, kind):
    from tiny_checkpoints import NER_LABELS, bert_tokenizer

    from hf_ctx import CtxBertConfig, CtxBertForMaskedLM, CtxBertForPreTraining, CtxBertForTokenClassification

    tokenizer = bert_tokenizer(tmp_path)
    config = _no_dropout(
        CtxBertConfig.from_preset(
            "tiny", vocab_size=len(tokenizer), max_position_embeddings=32, id2label=dict(enumerate(NER_LABELS))
        )
    )
    model = {"mlm": CtxBertForMaskedLM, "pretraining": CtxBertForPreTraining, "tagger": CtxBertForTokenClassification}[
        kind
    ](config)
    rows = []
    for i, sentence in enumerate(ACCUMULATION_SENTENCES):
        ids = tokenizer(sentence)["input_ids"]
        if kind == "tagger":
            labels = [-100] + [(i + j) % 3 for j in range(len(ids) - 2)] + [-100]
        else:  # every other token masked, its id the label
            labels = [ids[j] if j % 2 else -100 for j in range(len(ids))]
            ids = [tokenizer.mask_token_id if j % 2 else ids[j] for j in range(len(ids))]
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels})
    from transformers import DataCollatorForTokenClassification

    return model, rows, DataCollatorForTokenClassification(tokenizer)


def _elmo_rows(tmp_path, kind):
    from tiny_checkpoints import NER_LABELS, elmo_bilm, elmo_crf_tagger, elmo_token_classifier, taglm

    from hf_ctx.data.bilm import BiLMDataCollator

    build = {"bilm": elmo_bilm, "tagger": elmo_token_classifier, "crf_tagger": elmo_crf_tagger, "taglm": taglm}[kind]
    model, tokenizer = build(tmp_path)
    model = type(model)(_no_dropout(model.config)) if kind != "taglm" else model
    if kind == "taglm":
        _no_dropout(model.config)
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    words = [sentence.split() for sentence in ACCUMULATION_SENTENCES]
    if kind == "bilm":
        return model, [{"words": w} for w in words], BiLMDataCollator(tokenizer)
    rows = []
    for i, sentence in enumerate(words):
        encoded = tokenizer(sentence, is_split_into_words=True)
        # The CRF taggers: O and B- tags, valid in any order under BIO
        labels = [(i + j) % (len(NER_LABELS) if kind == "tagger" else 2) for j in range(len(sentence))]
        rows.append({**{k: encoded[k] for k in encoded}, "labels": labels})

    def collate(features):
        width = max(len(f["labels"]) for f in features)
        batch = tokenizer.pad([{k: f[k] for k in f if k != "labels"} for f in features], return_tensors="pt")
        batch["labels"] = torch.tensor([f["labels"] + [-100] * (width - len(f["labels"])) for f in features])
        return batch

    return model, rows, collate


def _pad_collate(pad_id):
    """Pads each row's lists to the batch's longest: `input_ids` with `pad_id`, `labels` with -100, the rest with
    0; numbers (a pair's or a sentence's label, span positions) become a (B,) tensor."""

    def collate(features):
        batch = {}
        for key in features[0]:
            values = [f[key] for f in features]
            if not isinstance(values[0], list):
                batch[key] = torch.tensor(values)
                continue
            fill = {"input_ids": pad_id, "labels": -100}.get(key, 0)
            nested = isinstance(values[0][0], list)  # multiple choice: (choices, tokens) per row
            width = max(len(v[0] if nested else v) for v in values)
            padded = [
                [c + [fill] * (width - len(c)) for c in v] if nested else v + [fill] * (width - len(v)) for v in values
            ]
            batch[key] = torch.tensor(padded)
        return batch

    return collate


def _bert_sentence_rows(tmp_path, kind):
    """BERT heads with a loss per sentence, pair, choice or span, over the 8 sentences of unequal lengths."""
    from tiny_checkpoints import NER_LABELS, bert_tokenizer

    from hf_ctx import (
        CtxBertConfig,
        CtxBertForMultipleChoice,
        CtxBertForPreTraining,
        CtxBertForQuestionAnswering,
        CtxBertForSequenceClassification,
        CtxBertForTokenClassification,
    )

    tokenizer = bert_tokenizer(tmp_path)
    extra = {"crf_tagger": {"id2label": dict(enumerate(NER_LABELS)), "use_crf": True, "tag_scheme": "BIO"}}
    config = _no_dropout(
        CtxBertConfig.from_preset(
            "tiny", vocab_size=len(tokenizer), max_position_embeddings=32, **extra.get(kind, {"num_labels": 2})
        )
    )
    model_class = {
        "mlm_nsp": CtxBertForPreTraining,
        "crf_tagger": CtxBertForTokenClassification,
        "sequence_classification": CtxBertForSequenceClassification,
        "multiple_choice": CtxBertForMultipleChoice,
        "question_answering": CtxBertForQuestionAnswering,
    }[kind]
    rows = []
    for i, sentence in enumerate(ACCUMULATION_SENTENCES):
        ids = tokenizer(sentence)["input_ids"]
        row = {"input_ids": ids, "attention_mask": [1] * len(ids)}
        if kind == "mlm_nsp":  # masked tokens (unequal counts per micro-batch) and one pair label each
            row["labels"] = [ids[j] if j % 2 else -100 for j in range(len(ids))]
            row["input_ids"] = [tokenizer.mask_token_id if j % 2 else ids[j] for j in range(len(ids))]
            row["next_sentence_label"] = i % 2 if i != 2 else -100
        elif kind == "crf_tagger":  # O and B- tags (valid in any order under BIO) on the words' first sub-tokens
            row["labels"] = [-100] + [(i + j) % 2 for j in range(len(ids) - 2)] + [-100]
        elif kind == "sequence_classification":
            row["labels"] = i % 2 if i not in (1, 3) else -100  # 2 of the first micro-batch's 4 without a label
        elif kind == "multiple_choice":  # each sentence against the next, as 2 choices of one length
            other = tokenizer(ACCUMULATION_SENTENCES[(i + 1) % 8])["input_ids"][1:]
            first, second = ids + other, ids[:1] + other + ids[1:]
            row = {"input_ids": [first, second], "attention_mask": [[1] * len(first)] * 2, "labels": i % 2}
        else:  # spans inside the input, and 3 starts and 1 end past it (ignored) in the first micro-batch
            row = {k: v + [0] * (24 - len(v)) for k, v in row.items()}  # one length: a span's limit
            row["start_positions"] = 30 if i in (0, 1, 3) else min(i, len(ids) - 2)
            row["end_positions"] = 30 if i == 2 else len(ids) - 2
        rows.append(row)
    return model_class(config), rows, _pad_collate(tokenizer.pad_token_id)


def _elmo_sequence_rows(tmp_path):
    from tiny_checkpoints import _elmo_config, elmo_tokenizer

    from hf_ctx import ElmoForSequenceClassification

    tokenizer = elmo_tokenizer()
    model = ElmoForSequenceClassification(_no_dropout(_elmo_config(tokenizer, num_labels=2)))
    rows = []
    for i, sentence in enumerate(ACCUMULATION_SENTENCES):
        encoded = tokenizer(sentence.split(), is_split_into_words=True)
        rows.append({**{k: encoded[k] for k in encoded}, "labels": i % 2 if i != 0 else -100})

    def collate(features):
        batch = tokenizer.pad([{k: f[k] for k in f if k != "labels"} for f in features], return_tensors="pt")
        batch["labels"] = torch.tensor([f["labels"] for f in features])
        return batch

    return model, rows, collate


ACCUMULATION_FAMILIES = {
    "bert_masked_lm": lambda tmp_path: _bert_rows(tmp_path, "mlm"),
    "bert_pretraining_mlm": lambda tmp_path: _bert_rows(tmp_path, "pretraining"),
    "bert_pretraining_mlm_nsp": lambda tmp_path: _bert_sentence_rows(tmp_path, "mlm_nsp"),
    "bert_token_classification": lambda tmp_path: _bert_rows(tmp_path, "tagger"),
    "bert_crf_token_classification": lambda tmp_path: _bert_sentence_rows(tmp_path, "crf_tagger"),
    "bert_sequence_classification": lambda tmp_path: _bert_sentence_rows(tmp_path, "sequence_classification"),
    "bert_multiple_choice": lambda tmp_path: _bert_sentence_rows(tmp_path, "multiple_choice"),
    "bert_question_answering": lambda tmp_path: _bert_sentence_rows(tmp_path, "question_answering"),
    "elmo_bilm": lambda tmp_path: _elmo_rows(tmp_path, "bilm"),
    "elmo_token_classification": lambda tmp_path: _elmo_rows(tmp_path, "tagger"),
    "elmo_crf_token_classification": lambda tmp_path: _elmo_rows(tmp_path, "crf_tagger"),
    "elmo_sequence_classification": _elmo_sequence_rows,
    "taglm_crf": lambda tmp_path: _elmo_rows(tmp_path, "taglm"),
}
# Heads whose loss is a mean over something else than the labels `Trainer` counts (sentences, pairs, spans):
# before `CtxTrainer` counted each term's items, their accumulated update differed from the big batch's.
SENTENCE_LOSSES = {
    "bert_pretraining_mlm_nsp",
    "bert_crf_token_classification",
    "bert_question_answering",
    "elmo_crf_token_classification",
    "taglm_crf",
}


def _one_step_update(
    model, rows, collate, tmp_path, batch_size, accumulation, accepts_loss_kwargs=True, trainer_class=None
):
    """The weights' change after one SGD step (learning rate 1, no clipping) of CtxTrainer (or `trainer_class`)
    on `rows`."""
    from datasets import Dataset
    from transformers import TrainingArguments

    from hf_ctx.tools.trainer import CtxTrainer

    trainer_class = trainer_class or CtxTrainer
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"),
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        max_steps=1,
        learning_rate=1.0,
        max_grad_norm=0.0,
        optim="sgd",
        lr_scheduler_type="constant",
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        remove_unused_columns=False,
        seed=0,
    )
    trainer = trainer_class(model=model, args=args, train_dataset=Dataset.from_list(rows), data_collator=collate)
    trainer.model_accepts_loss_kwargs = accepts_loss_kwargs
    trainer.train()
    update = {k: (v - initial[k]).clone() for k, v in model.state_dict().items() if v.is_floating_point()}
    model.load_state_dict(initial)
    return update


@pytest.mark.parametrize("family", ACCUMULATION_FAMILIES)
def test_two_accumulated_micro_batches_of_4_update_as_one_batch_of_8(family, tmp_path):
    """The issue's case: --per_device_train_batch_size 4 --gradient_accumulation_steps 2 gave another update than
    batch 8 on the same sentences (relative difference 0.05): each micro-batch's token loss was its own mean. Every
    head's update is now the big batch's, the weights after it equal to 1e-6 relative (float32): the token losses
    through `Trainer`'s count of the labels, the means over sentences, pairs and spans through `CtxTrainer`'s count
    of each term's items. Without them (the loss kwargs off, or transformers' `Trainer` for the latter) it differs."""
    from transformers import Trainer

    model, rows, collate = ACCUMULATION_FAMILIES[family](tmp_path)
    weights = {k: v.clone() for k, v in model.state_dict().items() if v.is_floating_point()}
    whole = _one_step_update(model, rows, collate, tmp_path, 8, 1)
    accumulated = _one_step_update(model, rows, collate, tmp_path, 4, 2)
    changed = [k for k in whole if whole[k].abs().max() > 0]
    assert changed
    after = torch.cat([(weights[k] + whole[k]).flatten() for k in weights])
    difference = torch.cat([(accumulated[k] - whole[k]).flatten() for k in weights])
    assert difference.norm() <= 1e-6 * after.norm()  # the weights after the step
    for key in changed:  # and each tensor's update, to float rounding
        torch.testing.assert_close(accumulated[key], whole[key], atol=1e-6, rtol=1e-4, msg=key)

    def largest_difference(update):
        return max(((update[k] - whole[k]).norm() / whole[k].norm()).item() for k in changed)

    if family == "bert_token_classification":  # the old behaviour (each micro-batch its own mean) differs
        old = _one_step_update(model, rows, collate, tmp_path, 4, 2, accepts_loss_kwargs=False)
        assert largest_difference(old) > 1e-3
    if family in SENTENCE_LOSSES:  # Trainer counts the labels only: a mean over sentences is weighted by them
        assert largest_difference(_one_step_update(model, rows, collate, tmp_path, 4, 2, trainer_class=Trainer)) > 1e-3


# --- batched pipeline calls equal the single calls ------------------------------------------------------------

BATCH_TEXTS = ["The red cat runs.", "A green dog eats fast, slow bird sleeps.", "red " * 9 + "cat", "Dog"]


def _tiny_pipelines(tmp_path):
    """name -> (pipeline, texts) for each pipeline hf_ctx defines or its models serve (eval mode, no dropout)."""
    from tiny_checkpoints import bert_crf_tagger, bert_token_classifier, elmo_crf_tagger, elmo_token_classifier, taglm
    from transformers import pipeline

    from hf_ctx import (
        CtxBertForMaskedLM,
        SubwordTokenClassificationPipeline,
        WordFeatureExtractionPipeline,
        WordTokenClassificationPipeline,
    )

    made = {}
    for name, build, kind in [
        ("bert_tagger", bert_token_classifier, SubwordTokenClassificationPipeline),
        ("bert_crf_tagger", bert_crf_tagger, SubwordTokenClassificationPipeline),
        ("elmo_tagger", elmo_token_classifier, WordTokenClassificationPipeline),
        ("elmo_crf_tagger", elmo_crf_tagger, WordTokenClassificationPipeline),
        ("taglm", taglm, WordTokenClassificationPipeline),
    ]:
        (tmp_path / name).mkdir()
        model, tokenizer = build(tmp_path / name)
        made[name] = pipeline(
            "token-classification", model=model.eval(), tokenizer=tokenizer, pipeline_class=kind, ignore_labels=[]
        )
    model, tokenizer = elmo_bilm(tmp_path)
    features = pipeline(
        "feature-extraction",
        model=model.elmo.eval(),
        tokenizer=tokenizer,
        pipeline_class=WordFeatureExtractionPipeline,
    )
    made["elmo_features"] = features
    made["elmo_features_all_layers"] = (features, {"output": "all"})
    model, tokenizer = made["bert_tagger"].model, made["bert_tagger"].tokenizer
    masked_lm = CtxBertForMaskedLM(model.config).eval()
    made["bert_fill_mask"] = pipeline("fill-mask", model=masked_lm, tokenizer=tokenizer, top_k=3)
    return made


def _comparable(output):
    """Nested outputs with floats rounded to 4 decimals (batched padding changes float sums in the last bits)."""
    if isinstance(output, dict):
        return {k: _comparable(v) for k, v in output.items()}
    if isinstance(output, (list, tuple)):
        return [_comparable(v) for v in output]
    if isinstance(output, (float, np.floating)):
        return round(float(output), 4)
    if isinstance(output, np.ndarray):
        return _comparable(output.tolist())
    return output


def test_batched_pipeline_calls_equal_the_single_calls(tmp_path):
    """The issue's case: WordFeatureExtractionPipeline with batch_size=2 returned one word per sentence. Every
    pipeline, at batch_size 1, 2 and 3, now returns what each text alone gives (scores to 4 decimals)."""
    for name, made in _tiny_pipelines(tmp_path).items():
        run, options = made if isinstance(made, tuple) else (made, {})
        texts = BATCH_TEXTS
        if name == "bert_fill_mask":
            mask = run.tokenizer.mask_token
            texts = [f"red {mask} runs", f"green dog {mask} fast slow bird", f"{mask} cat", f"dog {mask}"]
        alone = [_comparable(run(text, **options)) for text in texts]
        if name.startswith("elmo_features"):
            assert [len(words) for words in alone] == [5, 10, 10, 1]
        for batch_size in (1, 2, 3):
            assert _comparable(run(texts, batch_size=batch_size, **options)) == alone, (name, batch_size)


# --- long texts are tagged to their end -----------------------------------------------------------------------

LONG_TEXT = " ".join(f"{'red green blue cat dog bird runs sleeps eats fast slow'.split()[i % 11]}" for i in range(150))


def _word_spans(text):
    import re

    return [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def _covered(entities, spans):
    """The words (start, end) that lie inside some entity's characters."""
    return [span for span in spans if any(e["start"] <= span[0] and span[1] <= e["end"] for e in entities)]


@pytest.mark.parametrize("builder", ["bert_token_classifier", "bert_crf_tagger"])
def test_bert_pipeline_tags_a_text_longer_than_its_window_to_its_end(builder, tmp_path):
    """The issue's case: a BERT token-classification pipeline on a long text tagged its first window (here 30
    sub-tokens) and left the other words without a tag. SubwordTokenClassificationPipeline reads windows with a
    stride: every one of the 150 words is in an entity; transformers' pipeline without stride covers the first
    window only (the old behaviour); a short text's tags are those of transformers' pipeline."""
    import tiny_checkpoints
    from transformers import pipeline

    from hf_ctx import SubwordTokenClassificationPipeline

    model, tokenizer = getattr(tiny_checkpoints, builder)(tmp_path)
    model.eval()
    tagger = pipeline(
        "token-classification",
        model=model,
        tokenizer=tokenizer,
        pipeline_class=SubwordTokenClassificationPipeline,
        ignore_labels=[],
    )
    spans = _word_spans(LONG_TEXT)
    assert len(tokenizer(LONG_TEXT)["input_ids"]) > 3 * tokenizer.model_max_length
    entities = tagger(LONG_TEXT, aggregation_strategy="first")
    assert _covered(entities, spans) == spans
    words = tagger(LONG_TEXT, aggregation_strategy="none")  # no windows: one entry per token, and a warning
    assert max(e["end"] for e in words) < len(LONG_TEXT) // 3
    if builder == "bert_token_classifier":
        plain = pipeline("token-classification", model=model, tokenizer=tokenizer, ignore_labels=[])
        assert len(_covered(plain(LONG_TEXT, aggregation_strategy="first"), spans)) < len(spans) // 3
        short = "red cat runs fast"
        assert tagger(short, aggregation_strategy="first") == plain(short, aggregation_strategy="first")


def test_bert_pipeline_without_windows_says_where_the_tags_stop(tmp_path, caplog):
    """aggregation_strategy="none" cannot use windows (overlapping tokens would be listed twice): the cut is a
    warning naming the character where the tags stop, not silence."""
    from tiny_checkpoints import bert_token_classifier
    from transformers import pipeline

    from hf_ctx import SubwordTokenClassificationPipeline

    model, tokenizer = bert_token_classifier(tmp_path)
    tagger = pipeline(
        "token-classification",
        model=model.eval(),
        tokenizer=tokenizer,
        pipeline_class=SubwordTokenClassificationPipeline,
    )
    with caplog.at_level("WARNING"):
        tagger(LONG_TEXT, aggregation_strategy="none")
    assert f"the text has {len(LONG_TEXT)} characters; the model reads 32 tokens, up to character" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        tagger("red cat", aggregation_strategy="none")
    assert "not tagged" not in caplog.text


def test_word_pipeline_tags_a_sentence_longer_than_the_model_reads_in_pieces(tmp_path, caplog):
    """A TagLM or ELMo tagger reads at most max_sentence_words words a sentence: a longer one was an error; it is
    now tagged in pieces (as run_ner.py splits it), every word tagged, with a warning."""
    from tiny_checkpoints import taglm
    from transformers import pipeline

    from hf_ctx import WordTokenClassificationPipeline

    model, tokenizer = taglm(tmp_path)
    model.bilm.config.max_sentence_words = 40
    tagger = pipeline(
        "token-classification",
        model=model.eval(),
        tokenizer=tokenizer,
        pipeline_class=WordTokenClassificationPipeline,
        ignore_labels=[],
    )
    with caplog.at_level("WARNING"):
        tags = tagger(LONG_TEXT)
    assert [(t["start"], t["end"]) for t in tags] == _word_spans(LONG_TEXT)
    assert "a sentence of 150 words (characters 0-" in caplog.text and "pieces of 40 words" in caplog.text
    short = "red cat runs fast"
    model.bilm.config.max_sentence_words = 1024
    alone = tagger(short)
    model.bilm.config.max_sentence_words = 40
    assert tagger(short) == alone


# --- predictions of a text file align with its lines ----------------------------------------------------------


def test_run_ner_text_file_with_blank_lines_says_which_lines_get_no_sentence(tmp_path, caplog):
    """run_ner --test_file x.txt --test_file_format text skipped blank lines silently, so the predictions' sentence
    N was not the file's line N. Each sentence keeps its line number, and the blank lines are a warning."""
    from hf_ctx.data.conll import read_plain_text

    text = tmp_path / "x.txt"
    text.write_text("red cat runs\n\nblue dog .\n \t \nfast\n\n")
    with caplog.at_level("WARNING"):
        sentences = read_plain_text(text)
    assert sentences["line"] == [1, 3, 5]
    assert sentences["tokens"] == [["red", "cat", "runs"], ["blue", "dog", "."], ["fast"]]
    assert "x.txt: lines 2, 4, 6 hold no words and get no sentence in the predictions: its 3 sentences" in caplog.text


def test_embed_text_file_with_a_blank_line_is_refused_by_line_before_writing(elmo_folder, tmp_path):
    """hf-ctx embed names its datasets after line indices, so a blank line would shift nothing but have no
    vectors: it is refused, naming the line, and no output is created."""
    from hf_ctx.tools.embed import ElmoEmbedder

    text, output = tmp_path / "x.txt", tmp_path / "vectors.hdf5"
    text.write_text("red cat\n\nblue dog\n")
    with pytest.raises(ValueError, match=r"x.txt: line 2 is empty"):
        ElmoEmbedder(str(elmo_folder), device="cpu").embed_file(text, output, progress=False)
    assert not output.exists()


def test_embed_datasets_are_named_after_their_lines_whatever_the_batch_order(elmo_folder, tmp_path):
    """Sentences are embedded sorted by length; dataset "i" still holds line i + 1's sentence and its vectors."""
    from hf_ctx.tools.embed import ElmoEmbedder

    lines = ["red cat", "blue dog runs fast slow", "bird", "green cat eats"]
    text, output = tmp_path / "x.txt", tmp_path / "vectors.hdf5"
    text.write_text("\n".join(lines) + "\n")
    ElmoEmbedder(str(elmo_folder), device="cpu").embed_file(text, output, batch_size=3, progress=False)
    with h5py.File(output, "r") as f:
        assert [f[str(i)].attrs["sentence"] for i in range(4)] == lines
        assert [f[str(i)].shape[1] for i in range(4)] == [len(line.split()) for line in lines]
