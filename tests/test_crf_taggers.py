"""The CRF of BERT's and ELMo's taggers (`use_crf`) against brute-force enumeration of every tag sequence of tiny
sentences, as tests/test_crf.py checks the CRF itself: the loss is the negative log-likelihood, the argmax of the
logits is the best allowed tag sequence of the words (BERT: each word's first sub-token), predictions cannot break
the tag scheme, and the pipelines report the CRF's decoding."""

import pytest
import torch
from test_crf import BIO_LABELS, brute_force, is_valid, sequence_score
from tiny_checkpoints import bert_tokenizer, elmo_tokenizer, taglm
from transformers import AutoModelForTokenClassification, pipeline

from hf_ctx import (
    CtxBertConfig,
    CtxBertForTokenClassification,
    ElmoConfig,
    ElmoForTokenClassification,
    SubwordTokenClassificationPipeline,
    WordTokenClassificationPipeline,
)
from hf_ctx.input_checks import IGNORE_INDEX

NUM_TAGS = len(BIO_LABELS)
I_PER = 2  # BIO_LABELS[2]: may follow only B-PER or I-PER

# BERT: (B, T) labels of tokens as `align_labels` gives them: -100 on [CLS], [SEP], padding and on the later
# sub-tokens of a word; 4, 2 and 3 words.
BERT_LABELS = torch.tensor(
    [
        [-100, 1, -100, 2, 0, -100, -100, 3, -100],
        [-100, 0, -100, -100, 0, -100, -100, -100, -100],
        [-100, 3, 4, -100, 0, -100, -100, -100, -100],
    ]
)
BERT_ATTENTION = torch.tensor([[1] * 9, [1] * 6 + [0] * 3, [1] * 6 + [0] * 3])
ELMO_SENTENCES = [["red", "cat", "runs", "fast"], ["blue", "dog"], ["the", "bird", "sleeps"]]
ELMO_LABELS = torch.tensor([[1, 2, 0, 3], [0, 0, -100, -100], [3, 4, 0, -100]])


def bert_crf(**overrides):
    fields = {
        "vocab_size": 60,
        "max_position_embeddings": 32,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "id2label": BIO_LABELS,
        "use_crf": True,
        "tag_scheme": "BIO",
    }
    torch.manual_seed(0)
    return CtxBertForTokenClassification(CtxBertConfig.from_preset("tiny", **{**fields, **overrides})).eval()


def elmo_crf(**overrides):
    fields = {
        "char_cnn": {"filters": [[1, 4], [2, 8]], "embedding": {"dim": 4}, "n_highway": 1},
        "lstm": {"dim": 16, "projection_dim": 8, "n_layers": 2},
        "task_hidden_size": 4,
        "classifier_dropout": 0.0,
        "id2label": BIO_LABELS,
        "use_crf": True,
        "tag_scheme": "BIO",
    }
    torch.manual_seed(0)
    return ElmoForTokenClassification(ElmoConfig(**{**fields, **overrides})).eval()


def spread_crf_scores(model):
    """Transition scores large enough that the CRF's decoding differs from each word's own argmax."""
    with torch.no_grad():
        model.crf.transitions.normal_(std=2.0)
        model.crf.start_transitions.normal_()
        model.crf.end_transitions.normal_()


def bert_inputs():
    torch.manual_seed(1)
    return {"input_ids": torch.randint(5, 60, BERT_LABELS.shape), "attention_mask": BERT_ATTENTION}


def elmo_inputs():
    return elmo_tokenizer()(ELMO_SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")


def run_capturing_emissions(model, **inputs):
    """The model's output and its classifier's output (the CRF's emissions)."""
    captured = {}
    handle = model.classifier.register_forward_hook(lambda module, args, output: captured.update(emissions=output))
    with torch.no_grad():
        output = model(**inputs)
    handle.remove()
    return output, captured["emissions"]


def check_against_brute_force(model, output, word_emissions, word_labels, word_logits):
    """Per sentence (lists of its words' (n, T) emissions, (n,) labels, (n, T) logits): the loss is the mean
    negative log-likelihood of the enumerated distribution, the logits' argmax its best sequence, which the
    scheme allows."""
    nll = []
    for emissions, labels, logits in zip(word_emissions, word_labels, word_logits):
        log_z, best, best_score = brute_force(model.crf, emissions, len(labels))
        nll.append(log_z - sequence_score(model.crf, emissions, labels.tolist()))
        assert logits.argmax(-1).tolist() == best
        assert is_valid("BIO", BIO_LABELS, best)
        torch.testing.assert_close(logits.max(-1).values, torch.full((len(labels),), best_score), atol=1e-3, rtol=0)
    assert output.loss.item() == pytest.approx(sum(nll) / len(nll), rel=1e-5, abs=1e-4)


def test_bert_crf_runs_over_first_subtokens_and_matches_brute_force():
    model = bert_crf()
    spread_crf_scores(model)
    inputs = bert_inputs()
    output, emissions = run_capturing_emissions(model, **inputs, labels=BERT_LABELS)
    words = BERT_LABELS != IGNORE_INDEX
    check_against_brute_force(
        model,
        output,
        [emissions[b][words[b]] for b in range(3)],
        [BERT_LABELS[b][words[b]] for b in range(3)],
        [output.logits[b][words[b]] for b in range(3)],
    )
    logits = output.logits
    # A word's later sub-tokens repeat its scores; [CLS] (before the first word) and padding are 0.
    torch.testing.assert_close(logits[0, 2], logits[0, 1], rtol=0, atol=0)
    torch.testing.assert_close(logits[1, 2:4], logits[1, 1].expand(2, -1), rtol=0, atol=0)
    torch.testing.assert_close(logits[1, 5], logits[1, 4], rtol=0, atol=0)  # [SEP] after the last word
    assert (logits[:, 0] == 0).all() and (logits[1:, 6:] == 0).all()
    # At inference the words come from word_mask: the same logits.
    without_labels = model(**inputs, word_mask=words.long()).logits
    torch.testing.assert_close(without_labels, logits)


def test_elmo_crf_matches_brute_force():
    model = elmo_crf()
    spread_crf_scores(model)
    inputs = elmo_inputs()
    output, emissions = run_capturing_emissions(model, **inputs, labels=ELMO_LABELS)
    lengths = [len(words) for words in ELMO_SENTENCES]
    check_against_brute_force(
        model,
        output,
        [emissions[b, :n] for b, n in enumerate(lengths)],
        [ELMO_LABELS[b, :n] for b, n in enumerate(lengths)],
        [output.logits[b, :n] for b, n in enumerate(lengths)],
    )
    assert (output.logits[1, 2:] == 0).all()
    torch.testing.assert_close(model(**inputs).logits, output.logits)


@pytest.mark.parametrize("family", ["bert", "elmo"])
def test_predictions_cannot_break_the_scheme(family):
    """Emissions that favour I-PER everywhere: each word's own argmax starts entities with I- (O -> I-PER), the
    CRF's decoding never does."""
    model = bert_crf() if family == "bert" else elmo_crf()
    with torch.no_grad():
        model.classifier.bias.copy_(torch.tensor([0.0, 0.0, 50.0, 0.0, 0.0]))
        model.crf.transitions.fill_(0.0)
    inputs, labels = (bert_inputs(), BERT_LABELS) if family == "bert" else (elmo_inputs(), ELMO_LABELS)
    words = labels != IGNORE_INDEX
    mask = {"word_mask": words} if family == "bert" else {}
    output, emissions = run_capturing_emissions(model, **inputs, **mask)
    for b in range(len(labels)):
        assert not is_valid("BIO", BIO_LABELS, emissions[b][words[b]].argmax(-1).tolist())
        decoded = output.logits[b][words[b]].argmax(-1).tolist()
        assert is_valid("BIO", BIO_LABELS, decoded)
        assert I_PER in decoded  # the emissions still count: I-PER inside entities that B-PER opens


@pytest.mark.parametrize("family", ["bert", "elmo"])
def test_labels_that_break_the_scheme_are_refused(family):
    model = bert_crf() if family == "bert" else elmo_crf()
    inputs, labels = (bert_inputs(), BERT_LABELS.clone()) if family == "bert" else (elmo_inputs(), ELMO_LABELS.clone())
    first_word = 1 if family == "bert" else 0  # BERT's token 0 is [CLS]
    labels[1, first_word] = I_PER
    with pytest.raises(ValueError, match=r"sentence 1 of the batch break the BIO tag scheme at its first word: the"):
        model(**inputs, labels=labels)
    labels[1, first_word] = 7
    with pytest.raises(ValueError, match=r"label 7 is outside \[0, num_labels=5\)"):
        model(**inputs, labels=labels)


@pytest.mark.parametrize(
    "family, mask",
    [("bert", None), ("bert", "word_mask"), ("elmo", None), ("elmo without crf", None), ("taglm", None)],
)
def test_labels_given_as_a_list_are_named(family, mask):
    """Before: BERT's CRF tagger refused "word_mask must be a torch.Tensor, got bool" (labels != -100 of a list),
    or with a word_mask, and the word taggers, failed on `'list' object has no attribute 'shape'`."""
    if family == "bert":
        model, inputs, labels = bert_crf(), bert_inputs(), BERT_LABELS
        if mask:
            inputs["word_mask"] = (labels != IGNORE_INDEX).long()
    elif family == "taglm":
        model, _ = taglm(None)
        inputs, labels = elmo_inputs(), ELMO_LABELS.clamp(min=0)
    else:
        model, inputs, labels = elmo_crf(use_crf=family == "elmo"), elmo_inputs(), ELMO_LABELS
    with pytest.raises(
        ValueError, match=r"^labels must be a tensor of integer class ids \(int64\), or -100 for none; got list$"
    ):
        model(**inputs, labels=labels.tolist())


def test_bert_crf_says_what_it_needs_to_find_the_words():
    inputs = bert_inputs()
    with pytest.raises(ValueError, match=r"pass word_mask .*SubwordTokenClassificationPipeline"):
        bert_crf()(**inputs)
    with pytest.raises(ValueError, match=r"word_mask has shape \(3, 8\), expected \(batch, tokens\) = \(3, 9\)"):
        bert_crf()(**inputs, word_mask=torch.ones(3, 8, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"word_mask is read by the CRF only"):
        bert_crf(use_crf=False)(**inputs, word_mask=BERT_LABELS != IGNORE_INDEX)


def test_bert_crf_word_mask_is_0_and_1_on_real_tokens_only():
    """A word mask of 0.5 was read as 1, and a word on padding decoded as a word (before: both in silence); one of
    0 and 1 as floats, integers or booleans gives one result."""
    model, inputs = bert_crf().eval(), bert_inputs()
    words = BERT_LABELS != IGNORE_INDEX
    with pytest.raises(
        ValueError, match=r"^word_mask must hold 1 at the first sub-token of each word and 0 elsewhere; it has 9 other"
    ):
        model(**inputs, word_mask=words * 0.5)
    on_padding = words.clone()
    on_padding[1, 7] = True  # attention_mask 0 there
    with pytest.raises(ValueError, match=r"^word_mask marks a padding token \(attention_mask 0\) as a word"):
        model(**inputs, word_mask=on_padding)
    labels = BERT_LABELS.clone()
    labels[1, 7] = 0
    with pytest.raises(ValueError, match=r"^labels marks a padding token .* \(a label other than -100\)"):
        model(**inputs, labels=labels)
    with torch.no_grad():
        expected = model(**inputs, word_mask=words).logits
        for same in (words.long(), words.float()):
            torch.testing.assert_close(model(**inputs, word_mask=same).logits, expected)


def test_crf_learns_and_its_constraints_survive_save_and_load(tmp_path):
    for name, model, inputs, labels in [
        ("bert", bert_crf(), bert_inputs(), BERT_LABELS),
        ("elmo", elmo_crf(), elmo_inputs(), ELMO_LABELS),
    ]:
        model.train()
        loss = model(**inputs, labels=labels).loss
        loss.backward()
        assert model.crf.transitions.grad.abs().sum() > 0
        model.eval()
        model.save_pretrained(tmp_path / name)
        loaded = AutoModelForTokenClassification.from_pretrained(tmp_path / name).eval()
        assert type(loaded) is type(model) and loaded.config.use_crf and loaded.config.tag_scheme == "BIO"
        assert torch.equal(loaded.crf.allowed, model.crf.allowed) and not loaded.crf.allowed.all()
        torch.testing.assert_close(loaded(**inputs, labels=labels).logits, model(**inputs, labels=labels).logits)


def bert_crf_pipeline(folder, **options):
    """(a BERT CRF tagger's `SubwordTokenClassificationPipeline` with `options`, the model, its tokenizer)."""
    tokenizer = bert_tokenizer(folder)
    model = bert_crf(vocab_size=len(tokenizer))
    spread_crf_scores(model)
    tagger = pipeline(
        "token-classification",
        model=model,
        tokenizer=tokenizer,
        pipeline_class=SubwordTokenClassificationPipeline,
        ignore_labels=[],
        **options,
    )
    return tagger, model, tokenizer


def test_bert_crf_pipeline_gives_the_viterbi_tags_of_the_words(tmp_path):
    tagger, model, tokenizer = bert_crf_pipeline(tmp_path)
    sentence = "reddish cat runs fastest"  # words of several sub-tokens
    encoding = tokenizer(sentence, return_tensors="pt")
    starts = [
        i for i, word in enumerate(encoding.word_ids()) if word is not None and word != encoding.word_ids()[i - 1]
    ]
    assert len(starts) == 4 and encoding["input_ids"].shape[1] > 6
    word_mask = torch.zeros_like(encoding["input_ids"], dtype=torch.bool)
    word_mask[0, starts] = True
    _, emissions = run_capturing_emissions(model, **encoding, word_mask=word_mask)
    viterbi, _ = model.crf.viterbi_decode(emissions[:, starts])
    tags = [BIO_LABELS[i] for i in viterbi[0].tolist()]
    # Aggregation "none": every sub-token carries its word's tag.
    tokens = tagger(sentence, aggregation_strategy="none")
    word_of = [word for word in encoding.word_ids() if word is not None]
    assert [e["entity"] for e in tokens] == [tags[word] for word in word_of]
    # The default, "first": words grouped into entities (a B- tag opens a group), as transformers groups them.
    groups = []
    for word, tag in zip(sentence.split(), tags):
        prefix, kind = tag.split("-") if "-" in tag else ("I", tag)
        if groups and groups[-1][0] == kind and prefix != "B":
            groups[-1][1].append(word)
        else:
            groups.append((kind, [word]))
    assert [(e["entity_group"], e["word"]) for e in tagger(sentence)] == [(k, " ".join(w)) for k, w in groups]
    # Batched, the padding is no word: each sentence is tagged as alone.
    sentences = [sentence, "cat runs"]

    def tags_of(results):
        return [[(e["entity_group"], e["word"]) for e in entities] for entities in results]

    assert tags_of(tagger(sentences, batch_size=2)) == tags_of([tagger(s) for s in sentences])
    plain = pipeline("token-classification", model=model, tokenizer=tokenizer)
    with pytest.raises(ValueError, match=r"pipeline_class=hf_ctx\.SubwordTokenClassificationPipeline"):
        plain(sentence)


def test_bert_crf_pipeline_gives_a_word_the_tokenizer_deletes_its_entry_and_the_unknown_tokens_tag(tmp_path):
    tagger, _, tokenizer = bert_crf_pipeline(tmp_path, aggregation_strategy="none")
    words = ["red", "\u00ad", "cat", "\x01", "runs", "\ufe0f"]  # a soft hyphen, a control character, a selector
    (entries,) = tagger(words, is_split_into_words=True)
    assert [e["word"] for e in entries] == words  # one entry a word (each one token here), as given
    assert [(e["start"], e["end"]) for e in entries] == [(0, 3), (4, 5), (6, 9), (10, 11), (12, 16), (17, 18)]
    (read,) = tagger([word if len(word) > 1 else tokenizer.unk_token for word in words], is_split_into_words=True)
    assert [e["entity"] for e in entries] == [e["entity"] for e in read]  # each tagged as its unknown token


def test_elmo_crf_word_pipeline_gives_the_viterbi_tags():
    model = elmo_crf()
    spread_crf_scores(model)
    tokenizer = elmo_tokenizer()
    tagger = pipeline(
        "token-classification",
        model=model,
        tokenizer=tokenizer,
        pipeline_class=WordTokenClassificationPipeline,
        ignore_labels=[],
    )
    words = ELMO_SENTENCES[0]
    _, emissions = run_capturing_emissions(model, **tokenizer([words], is_split_into_words=True, return_tensors="pt"))
    viterbi, _ = model.crf.viterbi_decode(emissions)
    assert [e["entity"] for e in tagger(" ".join(words))] == [BIO_LABELS[i] for i in viterbi[0].tolist()]
