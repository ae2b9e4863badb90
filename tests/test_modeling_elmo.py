"""ELMo models: layer outputs and their alignment with the words, masking (padding, empty sentences), the biLM
targets and losses (checked by hand and by causality), sampled softmax, presets, Auto classes, task heads, bad
input."""

import json
import math
import random

import pytest
import torch
import transformers
from torch.nn import functional as F
from transformers import AutoModel, AutoModelForPreTraining, AutoModelForTokenClassification
from transformers.testing_utils import CaptureLogger

import hf_ctx  # noqa: F401  (registers the Auto classes)
from hf_ctx import (
    ElmoConfig,
    ElmoForBiLM,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoTokenizer,
)

VOCAB = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "on", "mat", "a", "dog"]
SENTENCES = ["the cat sat on the mat", "a dog", "", "the dog sat"]


def tiny_config(**overrides):
    fields = {
        "char_cnn": {"filters": [[1, 4], [2, 6], [3, 6]], "embedding": {"dim": 4}, "n_highway": 1},
        "lstm": {"dim": 12, "projection_dim": 5, "n_layers": 2, "cell_clip": 3.0, "proj_clip": 3.0},
        "vocab_size": len(VOCAB),
        "dropout": 0.0,
        "task_hidden_size": 4,
        "classifier_dropout": 0.0,
    }
    for section in ("char_cnn", "lstm"):
        fields[section].update(overrides.pop(section, {}))
    fields.update(overrides)
    return ElmoConfig(**fields)


@pytest.fixture(scope="module")
def tokenizer():
    return ElmoTokenizer(vocab=VOCAB)


@pytest.fixture
def batch(tokenizer):
    return tokenizer(SENTENCES, padding=True, return_tensors="pt")


def test_hidden_states_one_per_word_per_layer(batch):
    model = ElmoModel(tiny_config()).eval()
    out = model(batch["input_ids"], batch["attention_mask"], output_hidden_states=True)
    assert len(out.hidden_states) == 3
    assert all(h.shape == (4, 6, 10) for h in out.hidden_states)
    assert torch.equal(out.last_hidden_state, out.hidden_states[-1])
    token_layer = out.hidden_states[0]
    assert torch.equal(token_layer[..., :5], token_layer[..., 5:])  # the token layer, twice
    assert model(batch["input_ids"], batch["attention_mask"]).hidden_states is None


@pytest.mark.parametrize("clip", [3.0, None])  # clipped path, fused-LSTM path
def test_padding_and_empty_sentences_change_nothing(tokenizer, batch, clip):
    model = ElmoModel(tiny_config(lstm={"cell_clip": clip, "proj_clip": clip})).eval()
    together = model(**batch, output_hidden_states=True).hidden_states
    for i, sentence in enumerate(SENTENCES):
        n = len(sentence.split())
        for layer in together:
            assert torch.isfinite(layer).all()
            assert (layer[i, n:] == 0).all()
        if n:
            alone = model(**tokenizer([sentence], return_tensors="pt"), output_hidden_states=True).hidden_states
            for layer_together, layer_alone in zip(together, alone):
                torch.testing.assert_close(layer_together[i, :n], layer_alone[0], atol=1e-6, rtol=1e-5)
    all_padding = model(torch.zeros(2, 3, 50, dtype=torch.long), output_hidden_states=True).hidden_states
    assert all((layer == 0).all() for layer in all_padding)


def test_sentence_boundaries_are_added_inside_the_model(tokenizer):
    """The words' vectors are those the biLM gives them inside <S> ... </S> (the tokenizer encodes these literal
    words with the boundary characters)."""
    model = ElmoModel(tiny_config()).eval()
    words = tokenizer(["the cat sat"], return_tensors="pt")
    out = model(**words, output_hidden_states=True).hidden_states
    bounded = tokenizer(["<S> the cat sat </S>"], return_tensors="pt")["input_ids"]
    tokens = model.char_cnn(bounded)
    layers = [torch.cat([tokens, tokens], -1)] + model.encoder(tokens, torch.ones(1, 5, dtype=torch.bool))
    for layer, expected in zip(out, layers):
        torch.testing.assert_close(layer, expected[:, 1:-1])


def test_bilm_loss_predicts_next_and_previous_words(tokenizer, batch):
    model = ElmoForBiLM(tiny_config()).eval()
    out = model(**batch, return_logits=True)
    bos, eos = VOCAB.index("<S>"), VOCAB.index("</S>")
    forward_nll, backward_nll = [], []
    for i, sentence in enumerate(SENTENCES):
        ids = [VOCAB.index(w) for w in sentence.split()]
        n = len(ids)
        forward_nll.append(
            F.cross_entropy(out.forward_logits[i, : n + 1], torch.tensor(ids + [eos]), reduction="none")
        )
        backward_nll.append(
            F.cross_entropy(out.backward_logits[i, : n + 1], torch.tensor([bos] + ids), reduction="none")
        )
        assert (out.forward_logits[i, n + 1 :] == 0).all()
    forward_loss, backward_loss = torch.cat(forward_nll).mean(), torch.cat(backward_nll).mean()
    torch.testing.assert_close(out.forward_loss, forward_loss)
    torch.testing.assert_close(out.backward_loss, backward_loss)
    torch.testing.assert_close(out.loss, (forward_loss + backward_loss) / 2)
    assert out.loss.item() == pytest.approx(math.log(len(VOCAB)), rel=0.2)  # untrained: near uniform


def test_each_direction_sees_only_its_side(tokenizer):
    """Changing word 3 of 5 changes the forward predictions made after reading it and the backward predictions
    made before reaching it (right to left), nothing else."""
    model = ElmoForBiLM(tiny_config()).eval()
    a = model(**tokenizer(["the cat sat on mat"], return_tensors="pt"), return_logits=True)
    b = model(**tokenizer(["the cat dog on mat"], return_tensors="pt"), return_logits=True)
    forward_changed = (a.forward_logits - b.forward_logits).abs().amax(-1)[0] > 1e-6
    backward_changed = (a.backward_logits - b.backward_logits).abs().amax(-1)[0] > 1e-6
    # Tokens are [<S>, w1 ... w5, </S>]: forward row i predicts token i+1 from tokens 0..i; backward row i
    # predicts token i from tokens i+1 .. 6. w3 is token 3.
    assert forward_changed.tolist() == [False, False, False, True, True, True]
    assert backward_changed.tolist() == [True, True, True, False, False, False]


def test_loss_of_a_padded_batch_is_the_mean_over_its_predictions(tokenizer, batch):
    model = ElmoForBiLM(tiny_config()).eval()
    together = model(**batch)
    totals, count = torch.zeros(2), 0
    for sentence in SENTENCES:
        alone = model(**tokenizer([sentence], padding=True, return_tensors="pt"))
        predictions = len(sentence.split()) + 1
        totals += torch.stack([alone.forward_loss, alone.backward_loss]) * predictions
        count += predictions
    torch.testing.assert_close(torch.stack([together.forward_loss, together.backward_loss]), totals / count)


def test_separate_softmaxes_when_not_shared(batch):
    model = ElmoForBiLM(tiny_config(share_softmax=False)).eval()
    out = model(**batch, return_logits=True, output_hidden_states=True)
    top = out.hidden_states[-1]  # backward row i reads word i's backward state (i < sentence length)
    torch.testing.assert_close(out.backward_logits[0, :6], model.backward_softmax(top[0, :, 5:]))
    torch.testing.assert_close(out.forward_logits[0, 1:7], model.softmax(top[0, :, :5]))
    assert not torch.allclose(out.backward_logits[0, :6], model.softmax(top[0, :, 5:]))


def test_sampled_softmax_trains_and_evaluates_with_the_full_softmax(batch):
    torch.manual_seed(0)
    model = ElmoForBiLM(tiny_config(num_sampled=4, dropout=0.1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    model.eval()
    before = model(**batch).loss.item()
    model.train()
    for _ in range(30):
        loss = model(**batch).loss
        assert torch.isfinite(loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    after = model(**batch).loss.item()
    assert after < 0.9 * before


@pytest.mark.slow  # a torch.compile trace of the training step: tens of seconds on 2 busy cores
def test_sampled_training_loss_compiles_as_one_graph_and_equals_eager(batch):
    """Eager training drops the padding rows and scores each distinct sampled word once; the compiled model (no
    host reads) scores every row and every draw. Same draws (same seed): same losses and gradients."""
    model = ElmoForBiLM(tiny_config(num_sampled=6)).train()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    results = []
    for run in (model, compiled):
        torch.manual_seed(0)
        out = run(**batch)
        gradients = torch.autograd.grad(out.loss, list(model.parameters()))
        results.append((torch.stack([out.forward_loss, out.backward_loss]), gradients))
    (eager_losses, eager_gradients), (compiled_losses, compiled_gradients) = results
    torch.testing.assert_close(compiled_losses, eager_losses)
    for compiled_gradient, eager_gradient in zip(compiled_gradients, eager_gradients):
        torch.testing.assert_close(compiled_gradient, eager_gradient)


@pytest.mark.parametrize("clip", [3.0, None])
def test_bilm_compiles_as_one_graph(batch, clip):
    """No graph breaks, so `torch.compile` (e.g. `Trainer --torch_compile`) fuses each LSTM step's elementwise work."""
    model = ElmoForBiLM(tiny_config(lstm={"cell_clip": clip, "proj_clip": clip}))
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(**batch).loss, model(**batch).loss)


def test_presets_match_the_published_models():
    original = ElmoConfig.from_preset("original")
    assert original.lstm["dim"] == 4096 and original.projection_dim == 512 and original.char_cnn["n_highway"] == 2
    assert sum(n for _, n in original.char_cnn["filters"]) == 2048 and original.lstm["cell_clip"] == 3
    small = ElmoConfig.from_preset("small", lstm={"n_layers": 1})
    assert (small.lstm["dim"], small.projection_dim, small.char_cnn["n_highway"], small.lstm["n_layers"]) == (
        1024,
        128,
        1,
        1,
    )
    with torch.device("meta"):
        model = ElmoModel(original)
    # AllenNLP's model page: the original ELMo has 93.6M parameters.
    assert round(model.num_parameters() / 1e6, 1) == 93.6


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="n_characters"):
        ElmoConfig(char_cnn={"n_characters": 261})
    with pytest.raises(ValueError, match="projection_dim"):
        ElmoConfig(lstm={"dim": 8, "projection_dim": 16})
    with pytest.raises(ValueError, match="unknown lstm option 'hidden'"):
        ElmoConfig(lstm={"hidden": 8})
    with pytest.raises(ValueError, match="activation"):
        ElmoConfig(char_cnn={"activation": "gelu"})
    with pytest.raises(ValueError, match="cell_clip"):
        ElmoConfig(lstm={"cell_clip": -1})
    with pytest.raises(ValueError, match="eos_token_id"):
        ElmoConfig(vocab_size=1)
    with pytest.raises(ValueError, match="unknown ELMo preset"):
        ElmoConfig.from_preset("huge")
    with pytest.raises(ValueError, match="vocab_size"):
        ElmoForBiLM(tiny_config(vocab_size=None))


def test_bad_input_is_a_clear_error(batch):
    model = ElmoForBiLM(tiny_config()).eval()
    with pytest.raises(ValueError, match=r"shape \(batch, words, 50\)"):
        model(input_ids=batch["input_ids"][..., :40])
    bad_chars = batch["input_ids"].clone()
    bad_chars[0, 0, 3] = 300
    with pytest.raises(ValueError, match="character id 300"):
        model(input_ids=bad_chars)
    holes = batch["attention_mask"].clone()
    holes[0, 1] = 0
    with pytest.raises(ValueError, match="right padding"):
        model(input_ids=batch["input_ids"], attention_mask=holes)
    with pytest.raises(ValueError, match="character ids are all 0"):
        model(input_ids=batch["input_ids"], attention_mask=torch.ones_like(batch["attention_mask"]))
    # A mask of 0.5 or 2 was read as 1 (before: in silence); 0 and 1 as floats are the integer mask
    for factor in (0.5, 2):
        with pytest.raises(
            ValueError, match=r"^attention_mask must hold 1 on words and 0 on padding; it has \d+ other"
        ):
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"] * factor)
    with torch.no_grad():
        torch.testing.assert_close(
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"].float()).forward_logits,
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).forward_logits,
        )
    words = batch["input_word_ids"].clone()
    words[0, 0] = len(VOCAB)
    with pytest.raises(ValueError, match="outside the word vocabulary"):
        model(**{**batch, "input_word_ids": words})
    with pytest.raises(
        ValueError, match=r"^input_word_ids must be integer word ids \(int64 or int32\), got dtype torch.float32$"
    ):
        model(**{**batch, "input_word_ids": batch["input_word_ids"].float()})
    # int32 word ids are the int64 ones (before: cross_entropy refused int32 targets)
    torch.testing.assert_close(
        model(**{**batch, "input_word_ids": batch["input_word_ids"].int()}).loss, model(**batch).loss
    )
    with pytest.raises(ValueError, match="integer"):
        model(input_ids=batch["input_ids"].float())
    # An empty sentence (ElmoTokenizer([""])): the biLM reads it (it predicts </S>), a task head refuses it (before:
    # PyTorch's "Cannot pack empty tensors").
    empty = torch.zeros(1, 0, 50, dtype=torch.long)
    for head in (ElmoForTokenClassification, ElmoForSequenceClassification):
        with pytest.raises(
            ValueError, match=rf"^input_ids hold no words \(shape \(1, 0, 50\)\); {head.__name__} labels"
        ):
            head(tiny_config(num_labels=2))(input_ids=empty)


def test_auto_classes_round_trip(tmp_path, tokenizer, batch):
    model = ElmoForBiLM(tiny_config()).eval()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert {"layers.py", "tokenization_elmo.py", "configuration_elmo.py"} <= {p.name for p in tmp_path.iterdir()}
    reloaded = AutoModelForPreTraining.from_pretrained(tmp_path)
    assert isinstance(reloaded, ElmoForBiLM)
    torch.testing.assert_close(reloaded(**batch).loss, model(**batch).loss)
    # The biLM's softmax is expected to stay behind when the encoder is loaded: no load report about it.
    with CaptureLogger(transformers.utils.logging.get_logger("transformers")) as captured:
        bilm = AutoModel.from_pretrained(tmp_path)
    assert "LOAD REPORT" not in captured.out and "softmax" not in captured.out
    assert isinstance(bilm, ElmoModel)
    torch.testing.assert_close(bilm(**batch).last_hidden_state, model.elmo(**batch).last_hidden_state)
    tagger = AutoModelForTokenClassification.from_pretrained(tmp_path, num_labels=3)
    assert isinstance(tagger, ElmoForTokenClassification)
    torch.testing.assert_close(tagger.elmo.char_cnn.projection.weight, model.elmo.char_cnn.projection.weight)
    # Loading makes parameters trainable; the task model's biLM must come back frozen.
    assert not any(p.requires_grad for p in tagger.elmo.parameters())
    assert all(p.requires_grad for p in tagger.classifier.parameters())


def test_other_unexpected_weights_are_still_reported(tmp_path):
    model = ElmoForBiLM(tiny_config())
    model.register_buffer("stray", torch.zeros(2))  # a key no ELMo model has
    model.save_pretrained(tmp_path)
    with CaptureLogger(transformers.utils.logging.get_logger("transformers")) as captured:
        ElmoModel.from_pretrained(tmp_path)
    assert "LOAD REPORT" in captured.out and "stray" in captured.out and "softmax" not in captured.out


def test_task_models_keep_the_bilm_frozen_and_train_the_rest(batch):
    torch.manual_seed(0)
    model = ElmoForTokenClassification(tiny_config(num_labels=3))
    frozen = {name: p.clone() for name, p in model.elmo.named_parameters()}
    assert not any(p.requires_grad for p in model.elmo.parameters())
    model.train()
    assert not model.elmo.training  # a frozen biLM uses no dropout
    mask = batch["attention_mask"].bool()
    labels = torch.randint(0, 3, mask.shape).masked_fill(~mask, -100)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    first = None
    for _ in range(40):
        out = model(**batch, labels=labels)
        first = first if first is not None else out.loss.item()
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    assert out.loss.item() < first / 2
    assert out.logits.shape == (4, 6, 3)
    assert all(torch.equal(p, frozen[name]) for name, p in model.elmo.named_parameters())
    assert model.scalar_mix.scalar_parameters.grad is not None


@pytest.mark.parametrize("task_hidden_size", [4, 0])
def test_two_output_representations_mix_the_layers_twice_at_the_input_and_output_of_the_task_lstm(
    batch, task_hidden_size
):
    """num_output_representations=2: a second scalar mix with its own parameters, concatenated to the task LSTM's
    output (to the first mix without a task LSTM), as AllenNLP's Elmo(num_output_representations=2) is used."""
    torch.manual_seed(0)
    config = tiny_config(num_labels=3, num_output_representations=2, task_hidden_size=task_hidden_size)
    model = ElmoForTokenClassification(config).eval()
    input_mix, output_mix = model.scalar_mixes()
    assert (input_mix, output_mix) == (model.scalar_mix, model.output_scalar_mix)
    with torch.no_grad():
        input_mix.scalar_parameters.copy_(torch.tensor([1.0, 0.0, -1.0]))
        output_mix.scalar_parameters.copy_(torch.tensor([-1.0, 0.0, 2.0]))
        output_mix.gamma.fill_(0.5)
        out = model(**batch)
        layers = model.elmo(**batch, output_hidden_states=True).hidden_states
    assert model.classifier.in_features == (2 * task_hidden_size or 10) + 10  # + the second mix (2 x projection)

    def mix(parameters, gamma):  # Peters et al. (2018), eq. 1
        return gamma * sum(w * h for w, h in zip(torch.softmax(parameters, 0), layers))

    first, second = mix(torch.tensor([1.0, 0.0, -1.0]), 1.0), mix(torch.tensor([-1.0, 0.0, 2.0]), 0.5)
    for i, n in enumerate(batch["attention_mask"].sum(1).tolist()):
        if n == 0:
            continue
        with torch.no_grad():
            task = model.task_encoder(first[i : i + 1, :n])[0][0] if task_hidden_size else first[i, :n]
            expected = model.classifier(torch.cat([task, second[i, :n]], dim=-1))
        torch.testing.assert_close(out.logits[i, :n], expected, atol=1e-5, rtol=1e-5)
    # Separate parameters, each trained by its own gradient.
    assert {"scalar_mix.scalar_parameters", "output_scalar_mix.scalar_parameters"} <= set(model.state_dict())
    mask = batch["attention_mask"].bool()
    model(**batch, labels=torch.randint(0, 3, mask.shape).masked_fill(~mask, -100)).loss.backward()
    gradients = input_mix.scalar_parameters.grad, output_mix.scalar_parameters.grad
    assert all(g is not None and g.abs().sum() > 0 for g in gradients) and not torch.allclose(*gradients)
    with pytest.raises(ValueError, match=r"num_output_representations must be one of \[1, 2\], got 3"):
        tiny_config(num_output_representations=3)


def test_scalar_mix_parameters_fix_the_task_mixes_as_allennlp_does(batch, tmp_path):
    """`scalar_mix_parameters` (AllenNLP's `Elmo` argument) are the fixed pre-softmax weights of every task mix:
    not trained, gamma 1, kept through save and load (before: accepted by the config and ignored)."""
    weights = [-1e4, 1.0, -1e4]  # the middle layer alone
    config = tiny_config(
        num_labels=3, scalar_mix_parameters=weights, num_output_representations=2, bilm_state_norm="none"
    )
    model = ElmoForTokenClassification(config).eval()
    for mix in model.scalar_mixes():
        assert mix.scalar_parameters.tolist() == weights and mix.gamma.item() == 1.0
        assert not mix.scalar_parameters.requires_grad and not mix.gamma.requires_grad
    with torch.no_grad():
        features = model(**batch, output_hidden_states=True).hidden_states[0]
        middle = model.elmo(**batch, output_hidden_states=True).hidden_states[1]
    torch.testing.assert_close(features[..., -10:], middle)  # the second mix, beside the task LSTM's output
    model.save_pretrained(tmp_path)
    loaded = ElmoForTokenClassification.from_pretrained(tmp_path)
    assert loaded.config.scalar_mix_parameters == weights
    assert all(not p.requires_grad for mix in loaded.scalar_mixes() for p in mix.parameters())
    assert all(mix.scalar_parameters.tolist() == weights for mix in loaded.scalar_mixes())
    with pytest.raises(ValueError, match=r"^scalar_mix_parameters has 2 values; this ELMo has 3 layers"):
        tiny_config(scalar_mix_parameters=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"^scalar_mix_parameters must be a list of finite numbers"):
        tiny_config(scalar_mix_parameters=[0.0, float("nan"), 1.0])
    with pytest.raises(ValueError, match=r"^scalar_mix_parameters must be a list of finite numbers"):
        tiny_config(scalar_mix_parameters=5)
    # None, the default: learned from equal weights
    assert all(mix.scalar_parameters.requires_grad for mix in ElmoForTokenClassification(tiny_config()).scalar_mixes())


def test_a_task_checkpoint_without_the_new_fields_loads_with_one_mix_and_no_crf(batch, tmp_path):
    model = ElmoForTokenClassification(tiny_config(num_labels=3)).eval()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    for field in ("num_output_representations", "use_crf", "tag_scheme"):
        del config[field]
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = AutoModelForTokenClassification.from_pretrained(tmp_path).eval()
    assert loaded.output_scalar_mix is None and loaded.crf is None and len(loaded.scalar_mixes()) == 1
    torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)


def test_sequence_classification_pools_words_and_handles_empty_sentences(batch):
    model = ElmoForSequenceClassification(tiny_config(num_labels=2, scalar_mix_layer_norm=True)).eval()
    out = model(**batch, labels=torch.tensor([0, 1, 1, 0]))
    assert out.logits.shape == (4, 2) and torch.isfinite(out.logits).all() and torch.isfinite(out.loss)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, torch.tensor([0, 1, 1, 0])))
    regression = ElmoForSequenceClassification(tiny_config(num_labels=1, task_hidden_size=0)).eval()
    out = regression(**batch, labels=torch.tensor([0.5, 1.0, 0.0, 2.0]))
    torch.testing.assert_close(out.loss, F.mse_loss(out.logits.squeeze(-1), torch.tensor([0.5, 1.0, 0.0, 2.0])))
    unfrozen = ElmoForSequenceClassification(tiny_config(num_labels=2, freeze_bilm=False))
    assert all(p.requires_grad for p in unfrozen.elmo.parameters())


def sentiment_sentences(count: int, rng: random.Random) -> tuple[list[list[str]], list[int]]:
    """Sentences of neutral words with one word that decides the label: "good"/"great" 1, "bad"/"awful" 0."""
    filler = "the a film movie was is it this plot actor story and of very quite rather scene ending music".split()
    sentences, labels = [], []
    for _ in range(count):
        label = rng.randint(0, 1)
        words = rng.sample(filler, rng.randint(3, 8))
        words.insert(rng.randint(0, len(words)), rng.choice(["good", "great"] if label else ["bad", "awful"]))
        sentences.append(words)
        labels.append(label)
    return sentences, labels


def train_on_sentiment_words(tokenizer, config: ElmoConfig, steps: int = 300) -> float:
    """Test accuracy of a sequence classifier on a frozen random biLM after `steps` Adam steps on
    `sentiment_sentences`."""
    rng = random.Random(0)
    torch.manual_seed(0)
    encoded = []
    for count in (256, 128):
        sentences, labels = sentiment_sentences(count, rng)
        batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        encoded.append((batch, torch.tensor(labels)))
    (train, labels), (test, test_labels) = encoded
    model = ElmoForSequenceClassification(config).train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(steps):
        rows = torch.randint(0, len(labels), (16,))
        loss = model(
            input_ids=train["input_ids"][rows], attention_mask=train["attention_mask"][rows], labels=labels[rows]
        ).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        predictions = model.eval()(**test).logits.argmax(-1)
    return (predictions == test_labels).float().mean().item()


@pytest.mark.slow
def test_a_frozen_random_biLM_is_enough_to_learn_a_word_identity_task(tokenizer):
    """The biLM's layers share a large component across words (positive ReLU features); centred per feature
    (`bilm_state_norm`, by default), they let the task LSTM learn which word decides the label. Uncentred, the
    same model stays near chance (0.77 test accuracy in this setting, 0.5 on a trained biLM's states)."""
    config = tiny_config(num_labels=2, task_hidden_size=16)
    assert config.bilm_state_norm == "center"
    assert train_on_sentiment_words(tokenizer, config) > 0.9


def test_bilm_state_norm_centres_each_layer_with_running_statistics(batch):
    model = ElmoForSequenceClassification(tiny_config(num_labels=2, bilm_state_norm="standardize"))
    mask = batch["attention_mask"].bool()
    layers = model.elmo.word_hidden_states(batch["input_ids"], mask)
    model.bilm_norm.momentum = 1.0  # the running statistics become this batch's
    trained = model.bilm_norm.train()(layers, mask)
    for layer, normalised in zip(layers, trained):
        words = layer[mask]
        expected = (words - words.mean(0)) / torch.sqrt(words.var(0, unbiased=False) + 1e-5)
        torch.testing.assert_close(normalised[mask], expected)
        assert (normalised[~mask] == 0).all()
    for normalised, evaluated in zip(trained, model.bilm_norm.eval()(layers, mask)):
        torch.testing.assert_close(evaluated, normalised)
    with pytest.raises(ValueError, match=r"bilm_state_norm must be one of \['none', 'center', 'standardize'\]"):
        tiny_config(bilm_state_norm="layer")


def test_a_task_checkpoint_without_bilm_state_norm_gives_its_old_outputs(batch, tmp_path):
    """A checkpoint saved before the field existed loads with `bilm_state_norm` "center" and running statistics
    of mean 0 and variance 1: the identity, so its predictions are unchanged."""
    model = ElmoForSequenceClassification(tiny_config(num_labels=2, bilm_state_norm="none")).eval()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["bilm_state_norm"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = ElmoForSequenceClassification.from_pretrained(tmp_path).eval()
    assert loaded.config.bilm_state_norm == "center"
    torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits, rtol=0, atol=0)


def test_task_word_vectors_are_trained_beside_the_frozen_biLM():
    config = ElmoConfig(
        char_cnn={"filters": [[1, 4], [2, 4]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 8, "projection_dim": 4, "n_layers": 1},
        vocab_size=10,
        task_hidden_size=0,
        task_word_embedding_size=6,
        num_labels=3,
    )
    model = ElmoForTokenClassification(config)
    assert model.classifier.in_features == 8 + 6  # ELMo (2 x projection) + word vectors
    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "a", "b", "c", "d", "e", "f", "g"])
    batch = tokenizer([["a", "b", "zz"], ["c"]], is_split_into_words=True, padding=True, return_tensors="pt")
    out = model(**batch, labels=torch.tensor([[0, 1, 2], [1, -100, -100]]))
    out.loss.backward()
    assert model.word_embeddings.weight.grad[[3, 4, 2, 5]].abs().sum(dim=1).gt(0).all()  # a, b, <UNK>, c
    assert all(p.grad is None for p in model.elmo.parameters())
    with pytest.raises(ValueError, match="pass input_word_ids"):
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    with pytest.raises(ValueError, match="outside the word vocabulary"):
        model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            input_word_ids=torch.full_like(batch["input_word_ids"], 10),
        )
    with pytest.raises(ValueError, match="needs vocab_size"):
        ElmoConfig(task_word_embedding_size=6)


def test_task_word_vectors_added_to_a_pretrained_biLM_are_initialised(tmp_path):
    """`from_pretrained` initialises only what the checkpoint lacks, module by module: the new word vectors must
    get real values (not uninitialised memory) and the biLM its saved ones."""
    config = ElmoConfig(
        char_cnn={"filters": [[1, 4], [2, 4]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 8, "projection_dim": 4, "n_layers": 1},
        vocab_size=50,
    )
    bilm = ElmoForBiLM(config)
    bilm.save_pretrained(tmp_path)
    model = ElmoForSequenceClassification.from_pretrained(tmp_path, num_labels=2, task_word_embedding_size=64)
    vectors = model.word_embeddings.weight
    assert torch.isfinite(vectors).all() and 0.9 < vectors.std().item() < 1.1
    torch.testing.assert_close(model.elmo.char_cnn.char_embeddings.weight, bilm.elmo.char_cnn.char_embeddings.weight)


def test_character_embeddings_keep_a_zero_padding_row():
    """The padding character's row 0 stays all zeros, whatever other embeddings the model has."""
    config = ElmoConfig(
        char_cnn={"filters": [[1, 4], [2, 4]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 8, "projection_dim": 4, "n_layers": 1},
        vocab_size=50,
        task_word_embedding_size=4,
    )
    for model in (ElmoForBiLM(config), ElmoForSequenceClassification(config)):
        weight = model.elmo.char_cnn.char_embeddings.weight
        assert not weight[0].any() and weight[1:].abs().sum(dim=1).gt(0).all()


def test_a_very_long_sentence_is_refused_or_truncated_as_the_tokenizer_says(tokenizer):
    """One 100,000-word sentence ran past 10 minutes and grew to 3.8 GB with no message."""
    model = ElmoModel(tiny_config()).eval()
    words = ["the", "cat"] * 50_000
    assert tokenizer.model_max_length == model.config.max_sentence_words == 1024
    with pytest.raises(ValueError, match=r"100000 words per sentence, more than this ELMo's max_sentence_words=1024"):
        model(**tokenizer([words], is_split_into_words=True, return_tensors="pt"))
    truncated = tokenizer([words], is_split_into_words=True, truncation=True, return_tensors="pt")
    assert truncated["input_ids"].shape[1] == 1024
    assert model(**truncated).last_hidden_state.shape[1] == 1024
    # The limit is the user's to change, in the config and the tokenizer alike.
    model.config.max_sentence_words = 2000
    longer = ElmoTokenizer(model_max_length=2000)([words], is_split_into_words=True, truncation=True)
    assert len(longer["input_ids"][0]) == 2000
    with pytest.raises(ValueError, match="max_sentence_words must be a positive integer"):
        model.config.max_sentence_words = 0


def test_each_input_check_reads_the_device_once_and_still_names_the_problem(count_host_syncs):
    """`check_character_ids` and `check_word_ids` promise one host sync each: one read of every value check,
    whatever errors they look for, so that a CUDA step waits once per check."""
    from hf_ctx.input_checks import check_character_ids, check_word_ids

    ids = torch.randint(1, 262, (2, 4, 5))
    attention_mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    config = type("Config", (), {"vocab_size": 10})
    with count_host_syncs() as counter:
        mask = check_character_ids(ids, attention_mask, 5, 262)
    assert counter.syncs == ["tolist"]
    with count_host_syncs() as counter:
        check_word_ids(config, torch.tensor([[1, 2, 9, 99], [0, 3, -5, 12]]), mask)  # out of range only at padding
    assert counter.syncs == ["tolist"]
    with pytest.raises(
        ValueError, match=r"input_word_ids contains -1, outside the word vocabulary \[0, vocab_size=10\)"
    ):
        check_word_ids(config, torch.tensor([[1, 2, -1, 0], [0, 3, 0, 0]]), mask)
    with pytest.raises(ValueError, match="found a word after padding"):
        check_character_ids(ids, torch.tensor([[1, 0, 1, 0], [1, 1, 0, 0]]), 5, 262)
    ids[1, 1] = 0
    with pytest.raises(ValueError, match="marks a word whose character ids are all 0"):
        check_character_ids(ids, attention_mask, 5, 262)
