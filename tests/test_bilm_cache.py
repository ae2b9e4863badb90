"""hf_ctx.data.bilm_cache: a frozen biLM's states computed once, exact, keyed by weights, config, tokenizer and text."""

import errno
import pickle
import types

import pytest
import torch
from transformers import DataCollatorWithPadding

from hf_ctx import (
    ElmoConfig,
    ElmoForBiLM,
    ElmoForTokenClassification,
    ElmoTokenizer,
    TagLMConfig,
    TagLMForTokenClassification,
    atomic_files,
)
from hf_ctx.data import bilm_cache
from hf_ctx.data.bilm_cache import BiLMStateCache, BiLMStatesCollator, with_bilm_cache

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dogs", "run", "fast", "."]
SENTENCES = [WORDS[:3], WORDS[2:9], WORDS[:1], WORDS[1:10], WORDS[4:6]]
BILM_CONFIG = {
    "char_cnn": {"filters": [[1, 4], [2, 8]], "embedding": {"dim": 4}, "n_highway": 1},
    "lstm": {"dim": 16, "projection_dim": 8, "n_layers": 2, "cell_clip": 3.0, "proj_clip": 3.0},
}


@pytest.fixture
def tokenizer():
    return ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", *WORDS])


@pytest.fixture
def features(tokenizer):
    """The sentences encoded as a dataset gives them to a collator, shortest first."""
    return sorted((dict(tokenizer(s, is_split_into_words=True)) for s in SENTENCES), key=lambda f: len(f["input_ids"]))


def taglm(tokenizer, seed=0, dropout=0.5):
    torch.manual_seed(seed)
    bilm = ElmoForBiLM(ElmoConfig(**BILM_CONFIG, vocab_size=tokenizer.vocab_size)).elmo
    config = TagLMConfig(
        vocab_size=tokenizer.vocab_size,
        word_embedding_dim=8,
        rnn_hidden_size=8,
        char_cnn_filters=8,
        num_labels=3,
        bilm_layers=[0, -1],
        dropout=dropout,
    )
    return TagLMForTokenClassification.from_bilm(bilm, config)


def elmo_tagger(tokenizer):
    torch.manual_seed(0)
    config = ElmoConfig(**BILM_CONFIG, vocab_size=tokenizer.vocab_size, num_labels=3, task_hidden_size=8)
    return ElmoForTokenClassification(config)


def cached_batch(model, tokenizer, features, batch_size=32):
    """(the collated batch without states, the cached states), the cache filled in batches of `batch_size`."""
    cache = BiLMStateCache(model.frozen_bilm(), tokenizer, "memory")
    cache.compute(features, batch_size=batch_size, progress=False)
    batch = BiLMStatesCollator(DataCollatorWithPadding(tokenizer), cache)(features)
    return batch, batch.pop("bilm_hidden_states")


@pytest.mark.parametrize("build", [taglm, elmo_tagger], ids=["taglm", "elmo"])
def test_logits_with_the_cache_equal_logits_without_it(tokenizer, features, build):
    model = build(tokenizer).eval()
    batch, states = cached_batch(model, tokenizer, features)
    assert states.dtype == torch.float32 and states.shape[:2] == batch["input_ids"].shape[:2]
    with torch.no_grad():
        direct = model(**batch).logits
        assert torch.equal(model(**batch, bilm_hidden_states=states).logits, direct)  # the biLM's own batch: bitwise
        # Cached in other batches, the states differ by float32 rounding only, as the model's own outputs do
        # between batchings.
        _, states = cached_batch(model, tokenizer, features, batch_size=2)
        torch.testing.assert_close(model(**batch, bilm_hidden_states=states).logits, direct, rtol=1e-5, atol=1e-5)


def test_dropout_after_the_biLM_still_varies_per_step(tokenizer, features):
    model = taglm(tokenizer).train()
    batch, states = cached_batch(model, tokenizer, features)
    with torch.no_grad():
        first, second = (model(**batch, bilm_hidden_states=states).logits for _ in range(2))
        assert not torch.equal(first, second)
        model.eval()
        assert torch.equal(model(**batch, bilm_hidden_states=states).logits, model(**batch).logits)


def test_the_disk_cache_is_reused_by_the_same_biLM_and_never_by_another(tokenizer, features, tmp_path):
    model = taglm(tokenizer)
    first = BiLMStateCache(model.bilm, tokenizer, "disk", tmp_path)
    assert first.compute(features, progress=False) == len(SENTENCES)
    # A second run: a new model object with the same weights finds every sentence on disk.
    again = BiLMStateCache(taglm(tokenizer).bilm, tokenizer, "disk", tmp_path)
    assert len(again) == len(SENTENCES) and again.compute(features, progress=False) == 0
    again = pickle.loads(pickle.dumps(again))  # as a data-loader worker process gets it
    batch = BiLMStatesCollator(DataCollatorWithPadding(tokenizer), again)(features)
    _, in_memory = cached_batch(model, tokenizer, features)
    assert torch.equal(batch["bilm_hidden_states"], in_memory)
    # One biLM weight changed: another fingerprint, every sentence recomputed.
    changed = taglm(tokenizer)
    with torch.no_grad():
        changed.bilm.encoder.parameters().__next__()[0, 0] += 1e-3
    other = BiLMStateCache(changed.bilm, tokenizer, "disk", tmp_path)
    assert other.folder != first.folder and len(other) == 0
    assert other.compute(features, progress=False) == len(SENTENCES)
    # A tokenizer with other words gives the biLM the same characters: the same cache, shared by taggers whose word
    # vocabularies differ. Another character width is another cache.
    bigger = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", *WORDS, "new"])
    assert BiLMStateCache(model.bilm, bigger, "disk", tmp_path).folder == first.folder
    wider = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", *WORDS], max_characters_per_token=60)
    assert BiLMStateCache(model.bilm, wider, "disk", tmp_path).folder != first.folder


@pytest.mark.parametrize(
    "section, key, value",
    [("char_cnn", "activation", "tanh"), ("lstm", "cell_clip", 0.05), ("lstm", "proj_clip", 0.05)],
)
def test_a_biLM_with_equal_weights_but_another_config_gets_its_own_cache(
    tokenizer, features, tmp_path, section, key, value
):
    torch.manual_seed(0)
    first = ElmoForBiLM(ElmoConfig(**BILM_CONFIG, vocab_size=tokenizer.vocab_size)).elmo.eval()
    changed_config = {**BILM_CONFIG, section: {**BILM_CONFIG[section], key: value}}
    other = ElmoForBiLM(ElmoConfig(**changed_config, vocab_size=tokenizer.vocab_size)).elmo.eval()
    other.load_state_dict(first.state_dict())  # equal weights, names, dtypes and shapes
    cache = BiLMStateCache(first, tokenizer, "disk", tmp_path)
    assert cache.compute(features, progress=False) == len(SENTENCES)
    second = BiLMStateCache(other, tokenizer, "disk", tmp_path)
    assert second.folder != cache.folder and len(second) == 0
    assert second.compute(features, progress=False) == len(SENTENCES)  # recomputed, not the first biLM's states
    sentence, words = bilm_cache.sentence_key(features[-1]["input_ids"])
    assert not torch.equal(second.get(sentence, words), cache.get(sentence, words))  # the field does change the states


def test_fields_only_a_task_head_reads_keep_the_cache(tokenizer, tmp_path):
    """ELMo task models share their config with their biLM: another head size is the same biLM."""
    torch.manual_seed(0)
    small = ElmoForTokenClassification(ElmoConfig(**BILM_CONFIG, vocab_size=12, num_labels=3, task_hidden_size=8))
    large = ElmoForTokenClassification(ElmoConfig(**BILM_CONFIG, vocab_size=12, num_labels=5, task_hidden_size=16))
    large.elmo.load_state_dict(small.elmo.state_dict())
    fingerprints = {bilm_cache.bilm_fingerprint(m.frozen_bilm(), tokenizer) for m in (small, large)}
    assert len(fingerprints) == 1


def test_a_corrupt_cache_file_is_an_error_naming_it_and_the_way_to_rebuild(tokenizer, features, tmp_path):
    model = taglm(tokenizer)
    BiLMStateCache(model.bilm, tokenizer, "disk", tmp_path).compute(features, progress=False)
    (shard,) = tmp_path.glob("*/states-*.safetensors")
    shard.write_bytes(shard.read_bytes()[:-10])  # truncated
    with pytest.raises(ValueError, match=rf"{shard}: corrupt biLM cache file .*delete .* --bilm_cache none"):
        BiLMStateCache(model.bilm, tokenizer, "disk", tmp_path)
    shard.write_bytes(b"\x00" * 64)  # garbage
    with pytest.raises(ValueError, match=rf"{shard}: corrupt biLM cache file"):
        BiLMStateCache(model.bilm, tokenizer, "disk", tmp_path)


def test_a_disk_filling_up_while_writing_leaves_nothing_a_later_run_reads(tokenizer, features, tmp_path, monkeypatch):
    model = taglm(tokenizer)

    def disk_full(fd):  # after the shard's bytes were written to its temporary file
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "fsync", disk_full)
    with pytest.raises(OSError, match=r"could not write the biLM cache .*states-.*\(the disk is full\)"):
        BiLMStateCache(model.bilm, tokenizer, "disk", tmp_path).compute(features, progress=False)
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []
    monkeypatch.undo()
    later = BiLMStateCache(model.bilm, tokenizer, "disk", tmp_path)
    assert len(later) == 0 and later.compute(features, progress=False) == len(SENTENCES)


def test_the_collator_computes_sentences_the_cache_lacks_and_pads_with_zeros(tokenizer, features):
    model = taglm(tokenizer).eval()
    cache = BiLMStateCache(model.bilm, tokenizer, "memory")
    batch = BiLMStatesCollator(DataCollatorWithPadding(tokenizer, pad_to_multiple_of=16), cache)(features)
    assert cache.computed == len(SENTENCES) and batch["bilm_hidden_states"].shape == (5, 16, 3, 16)
    padding = ~batch["attention_mask"].bool()
    assert (batch["bilm_hidden_states"][padding] == 0).all()
    states = batch.pop("bilm_hidden_states")
    with torch.no_grad():
        torch.testing.assert_close(model(**batch, bilm_hidden_states=states).logits, model(**batch).logits)


def test_bad_states_and_a_trained_biLM_are_errors(tokenizer, features):
    model = taglm(tokenizer)
    batch, states = cached_batch(model, tokenizer, features)
    with pytest.raises(ValueError, match=r"bilm_hidden_states has shape \(5, 9, 2, 16\).*expected .* \(5, 9, 3, 16\)"):
        model(**batch, bilm_hidden_states=states[:, :, :2])
    # NaN or infinity anywhere, padding included, in TagLM and an ELMo task model (before: NaN outputs in silence)
    for value, position in [(float("nan"), (0, 0, 1, 3)), (float("inf"), (0, 8, 0, 0))]:
        damaged = states.clone()
        damaged[position] = value
        for tagger in (model, elmo_tagger(tokenizer)):
            with pytest.raises(ValueError, match=r"^bilm_hidden_states hold NaN or infinite values"):
                tagger(**batch, bilm_hidden_states=damaged)
    no_bilm = TagLMForTokenClassification(TagLMConfig(vocab_size=tokenizer.vocab_size, num_labels=3))
    with pytest.raises(ValueError, match="this TagLM has no biLM"):
        no_bilm(**batch, bilm_hidden_states=states)
    trained = elmo_tagger(tokenizer)
    trained.config.freeze_bilm = False
    with pytest.raises(ValueError, match="freeze_bilm=False"):
        trained(**batch, bilm_hidden_states=states)
    args = types.SimpleNamespace(bilm_cache="memory", bilm_cache_dir=None)
    with pytest.raises(ValueError, match="--bilm_cache memory needs a frozen biLM"):
        with_bilm_cache(trained, tokenizer, None, {}, args, "out", "cpu")
    # By default a trained biLM or no biLM means no cache, quietly: nothing exact to cache.
    args.bilm_cache = None
    assert with_bilm_cache(trained, tokenizer, "collator", {}, args, "out", "cpu") == "collator"
    assert with_bilm_cache(no_bilm, tokenizer, "collator", {}, args, "out", "cpu") == "collator"
