"""TagLM: shapes and masking, the CRF loss and decoding it exposes, bad input, learning, saving, word vectors."""

import json

import pytest
import torch
from transformers import AutoModelForTokenClassification

from hf_ctx import TagLMConfig, TagLMForTokenClassification

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def char_ids(words, width=50):
    """ELMo's character encoding written out: begin-of-word 259, UTF-8 bytes + 1, end-of-word 260, padding 261."""
    rows = []
    for word in words:
        ids = [259] + [b + 1 for b in word.encode("utf-8")[: width - 2]] + [260]
        rows.append(ids + [261] * (width - len(ids)))
    return rows


def batch(sentences, vocab):
    """(input_ids, attention_mask, input_word_ids) for lists of words, padded with zeros."""
    width = max(len(s) for s in sentences)
    input_ids = torch.zeros(len(sentences), width, 50, dtype=torch.long)
    mask = torch.zeros(len(sentences), width, dtype=torch.long)
    word_ids = torch.zeros(len(sentences), width, dtype=torch.long)
    for i, words in enumerate(sentences):
        input_ids[i, : len(words)] = torch.tensor(char_ids(words))
        mask[i, : len(words)] = 1
        word_ids[i, : len(words)] = torch.tensor([vocab.get(w, 1) for w in words])
    return input_ids, mask, word_ids


def tiny_config(**overrides):
    fields = {
        "vocab_size": 30,
        "word_embedding_dim": 8,
        "char_embedding_dim": 6,
        "char_cnn_filters": 7,
        "char_rnn_hidden_size": 5,
        "rnn_hidden_size": 9,
        "dropout": 0.0,
        "id2label": dict(enumerate(LABELS)),
        "tag_scheme": "BIO",
    }
    fields.update(overrides)
    return TagLMConfig(**fields)


SENTENCES = [["Peter", "lives", "in", "Paris"], ["Anna", "Smith", "left"], ["Rome"]]
VOCAB = {w: i + 2 for i, w in enumerate(sorted({w for s in SENTENCES for w in s}))}


@pytest.mark.parametrize("char_representation", ["cnn", "gru"])
@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_padding_does_not_change_a_sentence(char_representation, rnn_type):
    model = TagLMForTokenClassification(tiny_config(char_representation=char_representation, rnn_type=rnn_type)).eval()
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    together = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids).logits
    assert together.shape == (3, 4, len(LABELS))
    for i, words in enumerate(SENTENCES):
        alone = model(
            *[t[i : i + 1, : len(words)] for t in (input_ids, mask)], input_word_ids=word_ids[i : i + 1, : len(words)]
        ).logits
        torch.testing.assert_close(together[i : i + 1, : len(words)], alone, atol=1e-5, rtol=1e-5)
        assert (together[i, len(words) :] == 0).all()


def test_loss_is_crf_nll_and_logits_decode_to_viterbi():
    model = TagLMForTokenClassification(tiny_config()).eval()
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    labels = torch.tensor([[1, 0, 0, 3], [1, 2, 0, -100], [3, -100, -100, -100]])
    captured = {}
    model.classifier.register_forward_hook(lambda module, args, output: captured.update(emissions=output))
    out = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids, labels=labels)
    emissions = captured["emissions"]
    expected = -model.crf(emissions, labels, mask).mean()
    torch.testing.assert_close(out.loss, expected)
    viterbi, _ = model.crf.viterbi_decode(emissions, mask)
    predicted = out.logits.argmax(-1).masked_fill(~mask.bool(), -100)
    assert torch.equal(predicted, viterbi)


def test_attention_mask_defaults_to_the_non_padding_words():
    model = TagLMForTokenClassification(tiny_config()).eval()
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    with_mask = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids).logits
    without = model(input_ids=input_ids, input_word_ids=word_ids).logits
    torch.testing.assert_close(with_mask, without)


def test_bad_inputs_raise_clear_errors():
    model = TagLMForTokenClassification(tiny_config())
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    with pytest.raises(ValueError, match=r"character ids of shape \(batch, words, 50\)"):
        model(input_ids=input_ids[:, :, :20], attention_mask=mask, input_word_ids=word_ids)
    with pytest.raises(
        ValueError, match=r"input_word_ids contains 30, outside the word vocabulary \[0, vocab_size=30\)"
    ):
        model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids.masked_fill(word_ids == 2, 30))
    with pytest.raises(ValueError, match=r"input_ids contains the character id 262"):
        model(input_ids=input_ids.masked_fill(input_ids == 259, 262), input_word_ids=word_ids)
    with pytest.raises(ValueError, match="needs input_word_ids"):
        model(input_ids=input_ids, attention_mask=mask)
    with pytest.raises(ValueError, match="labels has shape"):
        model(input_ids=input_ids, input_word_ids=word_ids, labels=torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="every word a tag"):
        model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids, labels=torch.full((3, 4), -100))
    with pytest.raises(ValueError, match="right padding"):
        model(input_ids=input_ids, attention_mask=torch.tensor([[0, 1, 1, 1]] * 3), input_word_ids=word_ids)
    with pytest.raises(
        ValueError, match=r"^input_word_ids must be integer word ids \(int64 or int32\), got dtype torch.float32$"
    ):
        model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids.float())
    with pytest.raises(ValueError, match=r"^labels must be a tensor of integer class ids .* got dtype torch.float32$"):
        model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids, labels=torch.zeros(3, 4))


def test_int32_word_ids_and_labels_are_the_int64_ones():
    model = TagLMForTokenClassification(tiny_config()).eval()
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    labels = torch.tensor([[1, 0, 0, 3], [1, 2, 0, -100], [3, -100, -100, -100]])
    expected = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids, labels=labels)
    narrow = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids.int(), labels=labels.int())
    torch.testing.assert_close(narrow.loss, expected.loss)
    torch.testing.assert_close(narrow.logits, expected.logits)


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="char_representation"):
        TagLMConfig(char_representation="lstm")
    with pytest.raises(ValueError, match="rnn_type"):
        TagLMConfig(rnn_type="transformer")
    with pytest.raises(ValueError, match="rnn_hidden_size must be a positive integer, got 0"):
        TagLMConfig(rnn_hidden_size=0)
    with pytest.raises(ValueError, match="tag_scheme"):
        TagLMConfig(tag_scheme="BILOU2")
    with pytest.raises(ValueError, match="prefix 'E'"):  # labels the scheme cannot constrain
        TagLMForTokenClassification(tiny_config(id2label={0: "O", 1: "E-PER"}))


@pytest.mark.slow
def test_learns_a_tiny_tagging_task():
    torch.manual_seed(0)
    model = TagLMForTokenClassification(tiny_config(rnn_hidden_size=16))
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    labels = torch.tensor([[1, 0, 0, 3], [1, 2, 0, -100], [3, -100, -100, -100]])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    first = None
    for _ in range(60):
        loss = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids, labels=labels).loss
        first = loss.item() if first is None else first
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    logits = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids).logits
    assert loss.item() < first / 20
    assert torch.equal(logits.argmax(-1)[mask.bool()], labels[mask.bool()])


def test_save_and_reload_through_auto_class(tmp_path):
    model = TagLMForTokenClassification(tiny_config(char_representation="gru", rnn_type="lstm")).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    reloaded = AutoModelForTokenClassification.from_pretrained(tmp_path).eval()
    assert type(reloaded) is TagLMForTokenClassification and reloaded.config.tag_scheme == "BIO"
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    torch.testing.assert_close(
        reloaded(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids).logits,
        model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids).logits,
    )
    assert torch.equal(reloaded.crf.allowed, model.crf.allowed)


def test_bilou_tagger_decodes_only_well_formed_sequences():
    """tag_scheme="BILOU" (= "BIOUL"): every decoded sentence, however the weights push, is well-formed BIOUL."""
    torch.manual_seed(0)
    labels = ["O", "B-PER", "I-PER", "L-PER", "U-PER"]
    model = TagLMForTokenClassification(tiny_config(id2label=dict(enumerate(labels)), tag_scheme="BILOU")).eval()
    with torch.no_grad():  # make the forbidden transitions the most attractive ones
        model.crf.transitions.copy_(torch.where(model.crf.allowed[:5, :5], -3.0, 3.0))
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    decoded = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids).logits.argmax(-1)
    allowed = model.crf.allowed
    for row, n in zip(decoded.tolist(), mask.sum(-1).tolist()):
        path = [5, *row[:n], 6]  # start, the words' tags, end
        assert all(allowed[a, b] for a, b in zip(path, path[1:])), [labels[t] for t in row[:n]]
    assert not allowed[1, 0] and not allowed[5, 3] and allowed[4, 4]  # B-PER -> O, start -> L-PER; U-PER -> U-PER


# --- with a frozen biLM ------------------------------------------------------------------------------------

from transformers import AutoTokenizer, Trainer, TrainingArguments, pipeline  # noqa: E402

from hf_ctx import ElmoConfig, ElmoModel, ElmoTokenizer, WordTokenClassificationPipeline  # noqa: E402

WORDS = ["<S>", "</S>", "<UNK>", *sorted({w for s in SENTENCES for w in s})]


def tiny_bilm():
    config = ElmoConfig(
        char_cnn={"embedding": {"dim": 4}, "filters": [[1, 4], [2, 6]], "n_highway": 1},
        lstm={"dim": 12, "projection_dim": 6, "n_layers": 2},
        vocab_size=len(WORDS),
    )
    return ElmoModel(config).eval()


@pytest.fixture
def bilm_dir(tmp_path):
    path = tmp_path / "bilm"
    tiny_bilm().save_pretrained(path)
    ElmoTokenizer(vocab=WORDS).save_pretrained(path)
    return path


def encode(tokenizer, sentences, labels=None):
    encoded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    if labels is not None:
        encoded["labels"] = labels
    return encoded


LABEL_IDS = torch.tensor([[1, 0, 0, 3], [1, 2, 0, -100], [3, -100, -100, -100]])


@pytest.mark.parametrize("bilm_layers", [[-1], [0, 2]])
def test_bilm_states_are_concatenated_after_the_first_rnn(bilm_dir, bilm_layers):
    bilm = ElmoModel.from_pretrained(bilm_dir).eval()
    model = TagLMForTokenClassification.from_bilm(
        bilm_dir, tiny_config(vocab_size=len(WORDS), bilm_layers=bilm_layers)
    )
    assert model.config.bilm_name_or_path == bilm_dir.name  # the folder, not the local path
    assert all(torch.equal(a, b) for a, b in zip(model.bilm.state_dict().values(), bilm.state_dict().values()))
    inputs = encode(ElmoTokenizer.from_pretrained(bilm_dir), SENTENCES)
    hidden = model.eval()(**inputs, output_hidden_states=True).hidden_states
    expected = bilm(
        input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], output_hidden_states=True
    ).hidden_states
    width = 2 * 6
    assert hidden[1].shape[-1] == 2 * model.config.rnn_hidden_size + len(bilm_layers) * width
    for k, layer in enumerate(bilm_layers):
        start = 2 * model.config.rnn_hidden_size + k * width
        torch.testing.assert_close(hidden[1][..., start : start + width], expected[layer])


def test_bilm_is_frozen_under_trainer(bilm_dir, tmp_path):
    model = TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS), dropout=0.3))
    model.bilm.config.dropout = 0.5
    bilm_before = {k: v.clone() for k, v in model.bilm.state_dict().items()}
    tagger_before = model.first_rnn.weight_ih_l0.detach().clone()
    tokenizer = ElmoTokenizer.from_pretrained(bilm_dir)
    examples = [{**{k: v[i] for k, v in encode(tokenizer, SENTENCES, LABEL_IDS).items()}} for i in range(3)]
    examples = [{k: v[: int(e["attention_mask"].sum())] for k, v in e.items()} for e in examples]
    from transformers import DataCollatorWithPadding

    trainer = Trainer(
        model=model,
        args=TrainingArguments(
            tmp_path / "run", max_steps=3, learning_rate=0.05, report_to="none", save_strategy="no", use_cpu=True
        ),
        train_dataset=examples,
        data_collator=DataCollatorWithPadding(tokenizer),
    )
    trainer.train()
    optimized = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert not optimized & {id(p) for p in model.bilm.parameters()}
    assert optimized == {id(p) for n, p in model.named_parameters() if not n.startswith("bilm.")}
    assert all(torch.equal(v, bilm_before[k]) for k, v in model.bilm.state_dict().items())
    assert not torch.equal(model.first_rnn.weight_ih_l0, tagger_before)
    model.train()
    assert model.training and not model.bilm.training  # no biLM dropout while the tagger trains


def test_checkpoint_holds_the_bilm_and_reloads_through_auto_classes(bilm_dir, tmp_path):
    import shutil

    model = TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS))).eval()
    tokenizer = AutoTokenizer.from_pretrained(bilm_dir)
    out = tmp_path / "taglm"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # config.json names the biLM by its folder, never by its local path (the folder may be published).
    saved_config = (out / "config.json").read_text()
    assert model.config.bilm_name_or_path == "bilm" and str(bilm_dir) not in saved_config
    assert json.loads(saved_config)["bilm_config"]["_name_or_path"] == "bilm"
    shutil.rmtree(bilm_dir)  # the tagger's folder is complete without the biLM's
    reloaded = AutoModelForTokenClassification.from_pretrained(out).eval()
    reloaded_tokenizer = AutoTokenizer.from_pretrained(out)
    assert type(reloaded) is TagLMForTokenClassification and type(reloaded_tokenizer) is ElmoTokenizer
    assert all(torch.equal(a, b) for a, b in zip(reloaded.state_dict().values(), model.state_dict().values()))
    assert not any(p.requires_grad for p in reloaded.bilm.parameters())
    inputs = encode(reloaded_tokenizer, SENTENCES)
    torch.testing.assert_close(reloaded(**inputs).logits, model(**inputs).logits)


def test_automodel_on_a_tagger_folder_gives_its_second_rnn_states(bilm_dir, tmp_path, caplog):
    """AutoModel on a tagger's folder is the base model (transformers' convention): TagLMModel, with the tagger's
    weights name for name, its frozen biLM, and last_hidden_state equal to the tagger's last hidden state."""
    from transformers import AutoModel

    from hf_ctx import TagLMModel

    model = TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS))).eval()
    out = tmp_path / "taglm"
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(bilm_dir).save_pretrained(out)
    base = AutoModel.from_pretrained(out).eval()
    assert type(base) is TagLMModel
    tagger_weights = model.state_dict()
    for name, value in base.state_dict().items():
        assert torch.equal(value, tagger_weights[name]), name
    assert set(tagger_weights) - set(base.state_dict()) == {
        name for name in tagger_weights if name.startswith(("classifier.", "crf."))
    }
    assert not any(p.requires_grad for p in base.bilm.parameters())
    inputs = encode(AutoTokenizer.from_pretrained(out), SENTENCES)
    expected = model(**inputs, output_hidden_states=True).hidden_states[-1]
    torch.testing.assert_close(base(**inputs).last_hidden_state, expected)


def test_bilm_layer_out_of_range_is_an_error(bilm_dir):
    with pytest.raises(ValueError, match="bilm_layers contains 3, but the biLM has 3 layers"):
        TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS), bilm_layers=[3]))


def test_bilm_layers_naming_one_layer_twice_are_refused_by_the_config_on_every_road_in(bilm_dir, tmp_path):
    """Before: [2, -1] on this 2-layer biLM concatenated the top layer twice, in silence, and config.json kept
    [2, -1]. The config knows the biLM's layers once `bilm_config` is set: its one check serves `TagLMConfig`,
    `from_bilm` (run_ner builds through it) and `from_pretrained` overrides; the range check moved there too."""
    twice = "bilm_layers [2, -1] names layer 2 twice (-1 is the top layer, 2, of this 2-layer biLM)"
    with pytest.raises(ValueError) as error:
        TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS), bilm_layers=[2, -1]))
    assert str(error.value) == twice
    bilm_config = tiny_bilm().config.to_dict()
    for layers, message in [
        ([2, -1], twice),
        ([-3, 0], "bilm_layers [-3, 0] names layer 0 twice (-3 is the token layer, 0, of this 2-layer biLM)"),
        ([1, -2], "bilm_layers [1, -2] names layer 1 twice (-2 is layer 1 of this 2-layer biLM)"),
        ([1, 1], "bilm_layers [1, 1] names layer 1 twice"),
        ([-4], "bilm_layers contains -4, but the biLM has 3 layers (0 = token layer, 2 = top)"),
    ]:
        with pytest.raises(ValueError) as error:
            tiny_config(vocab_size=len(WORDS), bilm_config=bilm_config, bilm_layers=layers)
        assert str(error.value) == message
    model = TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS), bilm_layers=[0, -1]))
    assert model.config.bilm_layers == [0, -1] and model.second_rnn.input_size == 2 * 9 + 2 * 12
    model.save_pretrained(tmp_path / "tagger")
    with pytest.raises(ValueError, match=r"config\.json: bilm_layers \[-1, 2\] names layer 2 twice \(-1 is the top"):
        TagLMConfig.from_pretrained(tmp_path / "tagger", bilm_layers=[-1, 2])


def taglm_tagging_pipeline(bilm_dir):
    """(model, tokenizer, pipeline) of a TagLM on the biLM of `bilm_dir`, every tag shown."""
    model = TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS))).eval()
    tokenizer = ElmoTokenizer.from_pretrained(bilm_dir)
    tagger = pipeline(
        "token-classification",
        model=model,
        tokenizer=tokenizer,
        pipeline_class=WordTokenClassificationPipeline,
        ignore_labels=[],
    )
    return model, tokenizer, tagger


def test_token_classification_pipeline_gives_the_crf_decoding(bilm_dir):
    model, tokenizer, tagger = taglm_tagging_pipeline(bilm_dir)
    sentence = "Anna  Smith lives in Zagreb"  # "Zagreb" is not in the vocabulary; two spaces after "Anna"
    words = sentence.split()
    entities = tagger(sentence)
    with torch.no_grad():
        emissions = {}
        model.classifier.register_forward_hook(lambda m, a, o: emissions.update(x=o))
        model(**tokenizer([words], is_split_into_words=True, return_tensors="pt"))
    viterbi, _ = model.crf.viterbi_decode(emissions["x"])
    assert [e["entity"] for e in entities] == [LABELS[i] for i in viterbi[0].tolist()]
    assert [e["word"] for e in entities] == words
    assert [sentence[e["start"] : e["end"]] for e in entities] == words
    assert all(0 < e["score"] <= 1 for e in entities)
    grouped = tagger(sentence, aggregation_strategy="simple")
    assert all(sentence[g["start"] : g["end"]] == g["word"] for g in grouped)
    (split_result,) = tagger(words, is_split_into_words=True)  # a batch of one, as transformers returns it
    assert [(e["word"], e["entity"]) for e in split_result] == [(e["word"], e["entity"]) for e in entities]
    assert split_result[1]["start"] == len("Anna ")  # offsets in the words joined by single spaces


def test_token_classification_pipeline_splits_raw_text_into_sentences_and_words(bilm_dir):
    """Punctuation comes off words as in CoNLL data, each sentence is tagged on its own (its tags are those of the
    sentence given alone), and every offset points into the original text."""
    model, tokenizer, tagger = taglm_tagging_pipeline(bilm_dir)
    text = "Anna Smith flew to Zagreb. Zagreb lives in Anna!"
    entities = tagger(text)
    assert [e["word"] for e in entities] == "Anna Smith flew to Zagreb . Zagreb lives in Anna !".split()
    assert all(text[e["start"] : e["end"]] == e["word"] for e in entities)
    assert entities[5]["start"] == text.index(".")
    first, second = tagger("Anna Smith flew to Zagreb."), tagger("Zagreb lives in Anna!")
    assert [e["entity"] for e in entities] == [e["entity"] for e in first + second]


def test_plain_token_classification_pipeline_names_the_word_level_one(bilm_dir):
    """transformers' own pipeline class needs sub-word tokens: a clear error instead of KeyError('special_tokens_mask')."""
    model = TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS))).eval()
    tagger = pipeline("token-classification", model=model, tokenizer=ElmoTokenizer.from_pretrained(bilm_dir))
    with pytest.raises(ValueError, match=r"pipeline_class=hf_ctx\.WordTokenClassificationPipeline"):
        tagger("Anna Smith lives in Zagreb")


def test_an_empty_batch_is_refused():
    model = TagLMForTokenClassification(tiny_config())
    with pytest.raises(ValueError, match=r"batch size 0"):
        model(input_ids=torch.zeros(0, 3, 50, dtype=torch.long), input_word_ids=torch.zeros(0, 3, dtype=torch.long))


@pytest.mark.parametrize(
    "labels, message",
    [
        ([[1, 0, 0, 3], [0, 2, 0, -100], [3, -100, -100, -100]], r"sentence 1 .* at word 1: O -> I-PER"),
        ([[1, 0, 0, 3], [1, 2, 0, -100], [4, -100, -100, -100]], r"sentence 2 .* first word: the sentence start"),
        ([[1, 0, 0, 2], [1, 2, 0, -100], [3, -100, -100, -100]], r"sentence 0 .* at word 3: O -> I-PER"),
    ],
)
def test_labels_the_scheme_forbids_are_refused(labels, message):
    """O -> I-X under BIO scored -10000 in the CRF: a loss of about 10,000 and no warning."""
    model = TagLMForTokenClassification(tiny_config()).eval()
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    with pytest.raises(ValueError, match=message + r".* not allowed\. Tags that start an entity with I- are IOB1"):
        model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids, labels=torch.tensor(labels))
    # Without a scheme every transition is allowed.
    model = TagLMForTokenClassification(tiny_config(tag_scheme=None)).eval()
    loss = model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids, labels=torch.tensor(labels)).loss
    assert loss.item() < 100


def test_each_input_is_checked_once_where_it_enters(bilm_dir, monkeypatch, count_host_syncs):
    """TagLM checks the character ids, word ids and labels itself; its biLM and CRF then run unchecked (their
    public forwards would check the same inputs again). The checks read the device three times: once each for
    the character ids, the word ids and the labels (negative, range and transitions together)."""
    from hf_ctx import crf, input_checks, modeling_taglm

    model = TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS))).eval()
    inputs = encode(ElmoTokenizer.from_pretrained(bilm_dir), SENTENCES, LABEL_IDS)
    checks = []
    check_character_ids = input_checks.check_character_ids
    for module in (input_checks, modeling_taglm):
        monkeypatch.setattr(module, "check_character_ids", lambda *a: checks.append("ids") or check_character_ids(*a))
    check_mask = crf.ConditionalRandomField._check
    monkeypatch.setattr(crf.ConditionalRandomField, "_check", lambda *a: checks.append("crf") or check_mask(*a))
    validate, counter = model._validate, count_host_syncs()

    def counted_validate(*args):
        with counter:
            return validate(*args)

    monkeypatch.setattr(model, "_validate", counted_validate)
    with torch.no_grad():
        output = model(**inputs)
    assert checks == ["ids"] and counter.syncs == ["tolist"] * 3, counter.syncs
    assert torch.isfinite(output.loss)


def test_bad_input_a_biLM_would_refuse_is_refused_by_the_tagger(bilm_dir):
    """The biLM runs unchecked inside TagLM, so the tagger refuses what it would: too many words, and character
    ids beyond its range (262) where the tagger's own range is wider."""
    model = TagLMForTokenClassification.from_bilm(bilm_dir, tiny_config(vocab_size=len(WORDS), n_characters=300))
    inputs = encode(ElmoTokenizer.from_pretrained(bilm_dir), SENTENCES)
    inputs["input_ids"][0, 0, 1] = 280
    with pytest.raises(ValueError, match=r"character id 280, outside \[0, 262\)"):
        model(**inputs)
    model.bilm.config.max_sentence_words = 3
    with pytest.raises(ValueError, match=r"4 words per sentence, more than this ELMo's max_sentence_words=3"):
        model(**encode(ElmoTokenizer.from_pretrained(bilm_dir), SENTENCES))


def test_a_label_beyond_the_tags_is_named_and_padding_labels_are_not_read():
    model = TagLMForTokenClassification(tiny_config()).eval()
    input_ids, mask, word_ids = batch(SENTENCES, VOCAB)
    labels = torch.tensor([[1, 0, 0, 3], [1, 2, 0, 99], [3, -7, 42, -100]])  # 99, -7 and 42 are padding
    assert torch.isfinite(model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids, labels=labels).loss)
    labels[0, 2] = 5
    with pytest.raises(ValueError, match=r"label 5 is outside \[0, num_labels=5\); a label is a class id, or -100"):
        model(input_ids=input_ids, attention_mask=mask, input_word_ids=word_ids, labels=labels)


def test_a_batch_of_only_empty_texts_is_tagged_as_the_texts_one_by_one(bilm_dir):
    """With `batch_size` > 1, a batch whose texts hold no words (padded to 0 words) gives no entities, as each
    text alone does; before, the model was called on them and refused 'input_ids hold no words'."""
    _, _, tagger = taglm_tagging_pipeline(bilm_dir)
    texts = ["Anna lives in Zagreb", "Anna", "", "  "]
    one_by_one = tagger(texts)
    assert one_by_one[2:] == [[], []]
    assert tagger(texts, batch_size=2) == one_by_one
