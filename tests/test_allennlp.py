"""hf_ctx.allennlp: AllenNLP's ELMo API, checked by AllenNLP's own tests on AllenNLP's own fixtures
(tests/fixtures/allennlp_elmo: a small bilm-tf ELMo and the original TensorFlow model's outputs).

The tests come from allenai/allennlp's tests/modules/elmo_test.py, tests/data/token_indexers/elmo_indexer_test.py
and, for ElmoEmbedder, allennlp/tests/commands/elmo_test.py (removed from AllenNLP with its `elmo` command in
2020), with `allennlp` imports replaced by `hf_ctx.allennlp`: modified copies of Apache-2.0 code
(tests/fixtures/allennlp_elmo/LICENSE). Each test's docstring says whether it is taken as it was or adapted, and
why. AllenNLP's data pipeline (Token, TextField, Instance, Vocabulary, Batch, SimpleDataLoader) became plain
lists, `batch_to_ids` and a dict vocabulary, with the same assertions.

Left out:
- the 9 TensorFlow batches after the first (test_elmo_bilm, test_embeddings_are_as_expected):
  TensorFlow carried LSTM states from batch to batch and hf_ctx starts every batch from zero, so only batch 0
  is comparable; `test_vectors_do_not_depend_on_earlier_batches` checks hf_ctx's side of that difference.
- elmo_indexer_test.py's test_elmo_indexer_with_additional_tokens: `tokens_to_add` is an option of AllenNLP's
  indexer, not of `batch_to_ids`.
- the `allennlp elmo` command line runs (tests/commands/elmo_test.py's `main()` calls): hf_ctx's command is
  `hf-ctx embed` (tests/test_elmo_embed.py); here its tests run through `ElmoEmbedder.embed_file`, which both use.
- test_batch_embedding_works_with_sentences_as_keys: `use_sentence_keys` is refused (a test below says so).
- tests/modules/token_embedders/elmo_token_embedder_test.py and stacked_elmo_lstm_test.py: AllenNLP's
  `ElmoTokenEmbedder` (trained inside AllenNLP models) and its private LSTM, not part of this API; hf_ctx's LSTM
  has its own tests (tests/test_layers.py, tests/test_convert_elmo.py).
"""

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from tiny_checkpoints import elmo_bilm

from hf_ctx.allennlp import Elmo, ElmoEmbedder, batch_to_ids
from hf_ctx.tools.convert_elmo import convert_elmo_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "allennlp_elmo"
OPTIONS = str(FIXTURES / "options.json")
WEIGHTS = str(FIXTURES / "lm_weights.hdf5")
TOP_LAYER = [-9e10, -9e10, 1.0]  # softmax: exactly (0, 0, 1)
TOKEN_LAYER = [1.0, -9e10, -9e10]
SENTENCES = [["The", "sentence", "."], ["ELMo", "helps", "disambiguate", "ELMo", "from", "Elmo", "."]]


def fixture_elmo(num_output_representations: int = 2, **kwargs) -> Elmo:
    return Elmo(OPTIONS, WEIGHTS, num_output_representations, **{"dropout": 0.0, **kwargs})


def load_sentences_embeddings():
    """AllenNLP's `_load_sentences_embeddings`: (sentences, expected top layers), each 3 lists of 10; the i-th
    entry of every list ran in TensorFlow batch i."""
    sentences = json.loads((FIXTURES / "sentences.json").read_text())
    expected = []
    for k in range(len(sentences)):
        with h5py.File(FIXTURES / f"lm_embeddings_{k}.hdf5", "r") as f:
            expected.append([np.concatenate([f[str(i)][0], f[str(i)][1]], axis=-1) for i in range(10)])
    return sentences, expected


def word_ids(sentences, vocab: list[str]) -> torch.Tensor:
    """(batch, words) ids into `vocab`, 0 (AllenNLP's @@PADDING@@) after each sentence: what AllenNLP's
    SingleIdTokenIndexer gave."""
    index = {word: i for i, word in enumerate(vocab)}
    longest = max(len(s) for s in sentences)
    return torch.tensor([[index.get(w, 1) for w in s] + [0] * (longest - len(s)) for s in sentences])


def vocabulary(sentences) -> list[str]:
    """AllenNLP's Vocabulary.from_instances for the "tokens" namespace: padding, unknown, then the words."""
    return ["@@PADDING@@", "@@UNKNOWN@@", *dict.fromkeys(w for s in sentences for w in s)]


# --- batch_to_ids: tests/data/token_indexers/elmo_indexer_test.py ---------------------------------------------


def padded(*ids: int) -> list[int]:
    return [*ids] + [261] * (50 - len(ids))


def test_bos_to_char_ids():
    """Taken (AllenNLP's indexer -> batch_to_ids)."""
    assert batch_to_ids([["<S>"]])[0].tolist() == [padded(259, 257, 260)]


def test_eos_to_char_ids():
    """Taken (AllenNLP's indexer -> batch_to_ids)."""
    assert batch_to_ids([["</S>"]])[0].tolist() == [padded(259, 258, 260)]


def test_unicode_to_char_ids():
    """Taken (AllenNLP's indexer -> batch_to_ids)."""
    assert batch_to_ids([[chr(256) + "t"]])[0].tolist() == [padded(259, 197, 129, 117, 260)]


def test_elmo_as_array_produces_token_sequence():
    """Adapted: AllenNLP padded one sentence to 3 words with `as_padded_tensor_dict`; here a 3-word sentence
    beside it sets the padding length."""
    ids = batch_to_ids([["Second", "."], ["a", "b", "c"]])
    assert ids.dtype == torch.int64 and ids.shape == (2, 3, 50)
    assert ids[0].tolist() == [padded(259, 84, 102, 100, 112, 111, 101, 260), padded(259, 47, 260), [0] * 50]


def test_elmo_empty_token_list():
    """Adapted from AllenNLP's ListField of TextFields: an empty sentence is all padding (zeros), the others not."""
    ids = batch_to_ids([["Apple"], [], ["Screen", "device"]])
    assert ids.shape == (3, 2, 50)
    np.testing.assert_array_equal(ids[1].numpy(), np.zeros((2, 50)))
    for sentence, words in ((0, 1), (2, 2)):
        assert (ids[sentence, :words] != 0).all(dim=-1).all()


def test_long_words_keep_their_first_48_bytes():
    """AllenNLP's ELMoCharacterMapper: the UTF-8 bytes cut to 48, then end-of-word."""
    word = "x" * 60
    assert batch_to_ids([[word]])[0, 0].tolist() == [259] + [ord("x") + 1] * 48 + [260]


def test_batch_to_ids_refuses_sentences_that_are_not_split_into_words():
    with pytest.raises(ValueError, match=r"list of strings; split each sentence into its words"):
        batch_to_ids(["The cat sat", "It slept"])


# --- Elmo: tests/modules/elmo_test.py ---------------------------------------------------------------------


def test_elmo_bilm():
    """Adapted from TestElmoBiLm.test_elmo_bilm: through the public `Elmo` with the top layer selected by
    `scalar_mix_parameters` (AllenNLP read the private `_ElmoBiLm`'s activations), batches of plain lists.
    The mask lengths are checked for all 10 TensorFlow batches; the vectors for batch 0, the one TensorFlow ran
    from zero states (its later batches started from the states the previous one left)."""
    sentences, expected = load_sentences_embeddings()
    elmo = fixture_elmo(1, scalar_mix_parameters=TOP_LAYER)
    for i in range(10):
        batch = [sentences[k][i].split() for k in range(3)]
        output = elmo(batch_to_ids(batch))
        top_layer, mask = output["elmo_representations"][0].detach().numpy(), output["mask"]
        lengths = mask.numpy().sum(axis=1)
        assert lengths.tolist() == [len(words) for words in batch]
        if i == 0:
            for k in range(3):
                assert np.allclose(top_layer[k, : lengths[k]], expected[k][0], atol=1.0e-6)
                assert np.abs(top_layer[k, : lengths[k]] - expected[k][0]).max() < 1e-5


def test_vectors_do_not_depend_on_earlier_batches():
    """Where hf_ctx differs on purpose: AllenNLP's biLM carried its LSTM states into the next batch (its
    test_elmo_4D_input had to call reset_states); hf_ctx's starts every batch from zero."""
    sentences, _ = load_sentences_embeddings()
    first, second = ([sentences[k][i].split() for k in range(3)] for i in (0, 1))
    elmo = fixture_elmo(1, scalar_mix_parameters=TOP_LAYER)
    alone = elmo(batch_to_ids(second))["elmo_representations"][0]
    elmo(batch_to_ids(first))
    after = elmo(batch_to_ids(second))["elmo_representations"][0]
    assert torch.equal(alone, after)


def test_elmo_char_cnn_cache_does_not_raise_error_for_uncached_words():
    """Adapted on plain lists; AllenNLP only ran it, here the outputs must also equal those without a cache."""
    sentences = [["This", "is", "OOV"], ["so", "is", "this"]]
    in_vocab_sentences = [["here", "is"], ["a", "vocab"]]
    vocab = vocabulary(in_vocab_sentences)
    cached = fixture_elmo(1, vocab_to_cache=vocab)
    plain = fixture_elmo(1)
    for batch in (in_vocab_sentences, sentences):
        output = cached(batch_to_ids(batch), word_ids(batch, vocab))
        expected = plain(batch_to_ids(batch))
        torch.testing.assert_close(output["elmo_representations"][0], expected["elmo_representations"][0])


def test_elmo_bilm_can_cache_char_cnn_embeddings():
    """Adapted: AllenNLP compared the private `_ElmoBiLm`'s activations with and without the cache; here every
    layer through `Elmo` (one fixed mix per layer), the cache being hf_ctx's (the words' token layer looked up
    by their character ids)."""
    sentences = [["This", "is", "a", "sentence"], ["Here", "'s", "one"], ["Another", "one"]]
    vocab = vocabulary(sentences)
    for layer in range(3):
        weights = [1.0 if k == layer else -9e10 for k in range(3)]
        no_cache = fixture_elmo(1, scalar_mix_parameters=weights).eval()
        cached = fixture_elmo(1, scalar_mix_parameters=weights, vocab_to_cache=vocab).eval()
        assert len(cached.bilm.token_cache_keys) == len(vocab) + 2  # and <S>, </S>
        without = no_cache(batch_to_ids(sentences))
        with_cache = cached(batch_to_ids(sentences), word_ids(sentences, vocab))
        np.testing.assert_array_equal(without["mask"].numpy(), with_cache["mask"].numpy())
        np.testing.assert_array_almost_equal(
            with_cache["elmo_representations"][0].detach().numpy(),
            without["elmo_representations"][0].detach().numpy(),
            decimal=6,
        )


def test_elmo():
    """Taken (AllenNLP's indexing pipeline -> batch_to_ids); dtypes and mask values added."""
    output = fixture_elmo()(batch_to_ids(SENTENCES))
    representations, mask = output["elmo_representations"], output["mask"]
    assert len(representations) == 2
    assert list(representations[0].size()) == [2, 7, 32]
    assert list(representations[1].size()) == [2, 7, 32]
    assert list(mask.size()) == [2, 7]
    assert representations[0].dtype == torch.float32 and mask.dtype == torch.bool
    assert mask.sum(dim=1).tolist() == [3, 7]
    assert (representations[0][0, 3:] == 0).all()  # padding


def test_elmo_keep_sentence_boundaries():
    """Taken; added: the words' vectors are those without the boundaries, <S> first and </S> after the words."""
    elmo = fixture_elmo(keep_sentence_boundaries=True, scalar_mix_parameters=TOP_LAYER)
    output = elmo(batch_to_ids(SENTENCES))
    representations, mask = output["elmo_representations"], output["mask"]
    assert len(representations) == 2
    assert list(representations[0].size()) == [2, 7 + 2, 32]
    assert list(representations[1].size()) == [2, 7 + 2, 32]
    assert list(mask.size()) == [2, 7 + 2]
    assert mask.sum(dim=1).tolist() == [3 + 2, 7 + 2]
    words = fixture_elmo(scalar_mix_parameters=TOP_LAYER)(batch_to_ids(SENTENCES))["elmo_representations"][0]
    torch.testing.assert_close(representations[0][0, 1:4], words[0, :3])
    torch.testing.assert_close(representations[0][1, 1:8], words[1])
    assert (representations[0][0, 4] != 0).any() and (representations[0][0, 5:] == 0).all()  # </S>, padding


def test_elmo_4D_input():
    """Taken, without AllenNLP's reset_states between the batches: hf_ctx's biLM keeps no state. Also with
    keep_sentence_boundaries, which AllenNLP's reshaping did not handle."""
    sentences = [
        [["The", "sentence", "."], ["ELMo", "helps", "disambiguate", "ELMo", "from", "Elmo", "."]],
        [["1", "2"], ["1", "2", "3", "4", "5", "6", "7"]],
        [["1", "2", "3", "4", "50", "60", "70"], ["The"]],
    ]
    for keep_sentence_boundaries in (False, True):
        elmo = fixture_elmo(keep_sentence_boundaries=keep_sentence_boundaries)
        all_character_ids = [batch_to_ids(batch_sentences) for batch_sentences in sentences]
        character_ids = torch.cat([ids.unsqueeze(1) for ids in all_character_ids], dim=1)  # (2, 3, 7, 50)
        embeddings_4d = elmo(character_ids)
        embeddings_3d = [elmo(char_ids) for char_ids in all_character_ids]
        steps = 7 + 2 * keep_sentence_boundaries
        assert embeddings_4d["mask"].shape == (2, 3, steps)
        for k in range(3):
            np.testing.assert_array_almost_equal(
                embeddings_4d["elmo_representations"][0][:, k, :, :].data.numpy(),
                embeddings_3d[k]["elmo_representations"][0].data.numpy(),
            )
            assert torch.equal(embeddings_4d["mask"][:, k], embeddings_3d[k]["mask"])


def test_sentences_of_no_words_give_empty_representations_and_no_sentences_are_refused():
    """hf_ctx's (AllenNLP reshaped 3-D inputs not at all; its result is the same): a batch whose sentences are all
    empty gives (batch, 0, dim) representations and an empty mask, in 3-D and 4-D; with the boundaries, each
    sentence's <S> and </S>, as beside a sentence with words. No sentences at all are refused, as by ElmoModel."""
    elmo = fixture_elmo(keep_sentence_boundaries=False)
    output = elmo(batch_to_ids([[], []]))
    assert [tuple(r.shape) for r in output["elmo_representations"]] == [(2, 0, 32), (2, 0, 32)]
    assert output["mask"].shape == (2, 0) and output["mask"].dtype == torch.bool
    output = elmo(torch.zeros(3, 2, 0, 50, dtype=torch.long))
    assert output["elmo_representations"][0].shape == (3, 2, 0, 32) and output["mask"].shape == (3, 2, 0)
    bounded = fixture_elmo(keep_sentence_boundaries=True, scalar_mix_parameters=TOP_LAYER)
    output = bounded(batch_to_ids([[], []]))
    assert output["elmo_representations"][0].shape == (2, 2, 32) and output["mask"].tolist() == [[True] * 2] * 2
    beside_words = bounded(batch_to_ids([["The"], []]))["elmo_representations"][0][1, :2]
    torch.testing.assert_close(output["elmo_representations"][0][0], beside_words)
    for inputs in (
        batch_to_ids([]),
        torch.zeros(0, 3, 50, dtype=torch.long),
        torch.zeros(2, 0, 3, 50, dtype=torch.long),
    ):
        with pytest.raises(ValueError, match=r"^inputs hold no sentences \(batch size 0, shape \("):
            elmo(inputs)


def test_elmo_with_module():
    """Adapted: the module is an hf_ctx ElmoModel (AllenNLP passed its private `_ElmoBiLm`); added: the output
    equals that of the files."""
    character_ids = batch_to_ids(SENTENCES)
    from_files = fixture_elmo(scalar_mix_parameters=TOP_LAYER)
    elmo = Elmo(None, None, 2, dropout=0.0, module=from_files.bilm, scalar_mix_parameters=TOP_LAYER)
    representations = elmo(character_ids)["elmo_representations"]
    assert len(representations) == 2
    for k in range(2):
        assert list(representations[k].size()) == [2, 7, 32]
    torch.testing.assert_close(representations[0], from_files(character_ids)["elmo_representations"][0])


def test_elmo_bilm_can_handle_higher_dimensional_input_with_cache():
    """Taken on plain lists (a dict vocabulary for AllenNLP's SingleIdTokenIndexer)."""
    sentences = [["This", "is", "a", "sentence"], ["Here", "'s", "one"], ["Another", "one"]]
    vocab = vocabulary(sentences)
    character_ids, words = batch_to_ids(sentences), word_ids(sentences, vocab)
    elmo_bilm = fixture_elmo(1, dropout=0.5, vocab_to_cache=vocab).eval()
    individual_dim = elmo_bilm(character_ids, words)
    elmo_bilm = fixture_elmo(1, dropout=0.5, vocab_to_cache=vocab).eval()
    expanded_word_ids = torch.stack([words for _ in range(4)], dim=1)
    expanded_char_ids = torch.stack([character_ids for _ in range(4)], dim=1)
    expanded_result = elmo_bilm(expanded_char_ids, expanded_word_ids)
    split_result = [x.squeeze(1) for x in torch.split(expanded_result["elmo_representations"][0], 1, dim=1)]
    for expanded in split_result:
        np.testing.assert_array_almost_equal(
            expanded.data.cpu().numpy(), individual_dim["elmo_representations"][0].data.cpu().numpy()
        )


@pytest.mark.parametrize("requires_grad", [True, False])
def test_elmo_requires_grad(requires_grad):
    """Adapted from TestElmoRequiresGrad: AllenNLP's ElmoTokenEmbedder is `Elmo` with one representation; its
    `_elmo_lstm` parameters are hf_ctx's `bilm`. Added: the scalar mix trains either way."""
    torch.manual_seed(0)
    elmo = Elmo(OPTIONS, WEIGHTS, 1, requires_grad=requires_grad)
    char_ids = torch.randint(1, 262, (3, 4, 50))  # AllenNLP drew from [0, 262): a word of 50 zeros is padding
    elmo(char_ids)["elmo_representations"][0].sum().backward()
    elmo_grads = [param.grad for name, param in elmo.named_parameters() if name.startswith("bilm.")]
    assert elmo_grads
    if requires_grad:
        assert all(grad is not None for grad in elmo_grads)
    else:
        assert all(grad is None for grad in elmo_grads)
    assert elmo.scalar_mix_0.scalar_parameters.grad is not None


def test_elmo_token_representation():
    """Adapted: the token layer (AllenNLP's private `_ElmoCharacterEncoder`) through `Elmo` with layer 0
    selected, whose vectors are [token ; token], against TensorFlow's for all 458 words, 50 words a sentence.
    The token layer depends on the word alone, so every word is comparable."""
    words = (FIXTURES / "vocab_test.txt").read_text().strip().split("\n")
    sentences = [words[k * 50 : (k + 1) * 50] for k in range(10)]
    output = fixture_elmo(1, scalar_mix_parameters=TOKEN_LAYER)(batch_to_ids(sentences))
    layer, mask = output["elmo_representations"][0].detach(), output["mask"]
    actual_embeddings = layer[mask].numpy()  # the words, in order
    with h5py.File(FIXTURES / "elmo_token_embeddings.hdf5", "r") as f:
        expected_embeddings = f["embedding"][...]
    assert actual_embeddings.shape == (len(words), 32)
    np.testing.assert_array_equal(actual_embeddings[:, :16], actual_embeddings[:, 16:])
    assert np.allclose(actual_embeddings[:, :16], expected_embeddings, atol=1e-6)


def test_elmo_token_representation_bos_eos():
    """Adapted as above: the words "<S>" and "</S>" get the vectors of the boundaries the model adds."""
    elmo = fixture_elmo(1, scalar_mix_parameters=TOKEN_LAYER, keep_sentence_boundaries=True)
    for correct_index, token in [[0, "<S>"], [2, "</S>"]]:
        embeddings = elmo(batch_to_ids([[token]]))["elmo_representations"][0]
        assert np.allclose(embeddings[0, correct_index, :].data.numpy(), embeddings[0, 1, :].data.numpy())


# --- Elmo: what AllenNLP's tests did not cover ---------------------------------------------------------------


def test_layer_norm_statistics_cover_the_words_and_boundaries_not_padding():
    """do_layer_norm as AllenNLP's ScalarMix computed it, written out in numpy: each layer normalised by the
    mean and variance of its values at the words, <S> and </S> of the batch (padding excluded)."""
    weights = [0.2, -0.5, 1.0]
    elmo = fixture_elmo(1, do_layer_norm=True, scalar_mix_parameters=weights, keep_sentence_boundaries=True)
    output = elmo(batch_to_ids(SENTENCES))
    character_ids = batch_to_ids(SENTENCES)
    layers, mask = elmo.bilm.bilm_layers(character_ids, (character_ids != 0).any(-1))
    keep = mask.numpy()[..., None].astype(np.float64)
    softmax = np.exp(weights) / np.exp(weights).sum()
    expected = 0
    for weight, layer in zip(softmax, layers):
        layer = layer.detach().numpy().astype(np.float64)
        count = keep.sum() * layer.shape[-1]
        mean = (layer * keep).sum() / count
        variance = (((layer * keep - mean) * keep) ** 2).sum() / count
        expected = expected + weight * (layer - mean) / np.sqrt(variance + 1e-13)
    expected = expected * keep  # hf_ctx's representations are zero at padding
    np.testing.assert_allclose(output["elmo_representations"][0].detach().numpy(), expected, atol=1e-5)


def test_the_bilm_runs_without_dropout_in_training_as_in_allennlp():
    """The fixture's options give no dropout, so hf_ctx's config has its default 0.1 between the LSTM layers;
    AllenNLP's biLM had none, in training too. Only `dropout` (on the representations) applies."""
    elmo = fixture_elmo(1)
    assert elmo.bilm.config.dropout > 0
    character_ids = batch_to_ids(SENTENCES)
    training = elmo.train()(character_ids)["elmo_representations"][0]
    assert elmo.training and not elmo.bilm.training
    evaluating = elmo.eval()(character_ids)["elmo_representations"][0]
    torch.testing.assert_close(training, evaluating)


def test_fixed_scalar_mix_parameters_are_not_trained():
    elmo = fixture_elmo(2, scalar_mix_parameters=TOP_LAYER)
    assert not any(p.requires_grad for p in elmo.parameters())
    assert [p.requires_grad for p in fixture_elmo(1).parameters()].count(True) == 2  # the mix's weights, gamma
    assert fixture_elmo(1).get_output_dim() == 32


def test_an_hf_ctx_biLM_folder_replaces_the_files(tmp_path):
    """A folder of `hf-ctx convert-elmo`, and one of pretrain_elmo.py (an ElmoForBiLM, with its softmax), load
    in place of options + weights."""
    character_ids = batch_to_ids(SENTENCES)
    convert_elmo_checkpoint(OPTIONS, WEIGHTS, tmp_path / "converted")
    from_folder = Elmo(str(tmp_path / "converted"), None, 1, dropout=0.0, scalar_mix_parameters=TOP_LAYER)
    from_files = fixture_elmo(1, scalar_mix_parameters=TOP_LAYER)
    torch.testing.assert_close(
        from_folder(character_ids)["elmo_representations"][0], from_files(character_ids)["elmo_representations"][0]
    )

    bilm, tokenizer = elmo_bilm(tmp_path)
    bilm.save_pretrained(tmp_path / "pretrained")
    tokenizer.save_pretrained(tmp_path / "pretrained")
    elmo = Elmo(tmp_path / "pretrained", None, 1, dropout=0.0, scalar_mix_parameters=[-9e10, 1.0, -9e10])
    batch = tokenizer([" ".join(s) for s in SENTENCES], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = bilm.eval().elmo(**batch, output_hidden_states=True).hidden_states
    torch.testing.assert_close(elmo(character_ids)["elmo_representations"][0], expected[1])  # the first biLSTM layer


def test_elmo_is_the_auto_models_layers_and_a_scalar_mix(tmp_path):
    """What docs/migrating.md says of the transformers way: `Elmo` with one trained mix and no dropout gives the
    vectors of `AutoModel`'s layers through `hf_ctx.ScalarMix` with the same weights."""
    from transformers import AutoModel, AutoTokenizer

    from hf_ctx import ScalarMix

    convert_elmo_checkpoint(OPTIONS, WEIGHTS, tmp_path / "elmo")
    elmo = fixture_elmo(1)
    with torch.no_grad():
        elmo.scalar_mix_0.scalar_parameters.copy_(torch.tensor([0.3, -1.0, 0.5]))
        elmo.scalar_mix_0.gamma.fill_(1.7)
    tokenizer, model = AutoTokenizer.from_pretrained(tmp_path / "elmo"), AutoModel.from_pretrained(tmp_path / "elmo")
    batch = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    mix = ScalarMix(model.config.num_output_layers)
    mix.load_state_dict(elmo.scalar_mix_0.state_dict())
    expected = mix(model(**batch, output_hidden_states=True).hidden_states, batch["attention_mask"])
    torch.testing.assert_close(elmo(batch_to_ids(SENTENCES))["elmo_representations"][0], expected)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("https://allennlp.s3.amazonaws.com/x_options.json", WEIGHTS), r"options_file is a URL .* downloads nothing"),
        ((OPTIONS, None), r"weight_file is missing: .*options\.json is a file"),
        ((OPTIONS, str(FIXTURES / "missing.hdf5")), r"weight_file .*missing\.hdf5 does not exist"),
        ((WEIGHTS, OPTIONS), r"the arguments are swapped"),
        ((str(FIXTURES), WEIGHTS), r"is a folder: pass an hf_ctx ELMo checkpoint folder alone"),
    ],
)
def test_bad_files_are_one_line_errors(arguments, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        Elmo(*arguments, 1)


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match=r"scalar_mix_parameters has 2 values; this ELMo has 3 layers"):
        fixture_elmo(1, scalar_mix_parameters=[0.0, 1.0])
    for weights in ([float("nan")] * 3, [float("inf"), 0.0, 0.0], [float("nan")] * 2, "abc"):
        with pytest.raises(ValueError) as error:  # before: every representation NaN, in silence
            fixture_elmo(1, scalar_mix_parameters=weights)
        assert str(error.value) == (
            f"scalar_mix_parameters must be a list of finite numbers, one per layer, got {weights!r} (or None: trained)"
        )
    with pytest.raises(ValueError, match=r"num_output_representations must be a positive integer, got 0"):
        fixture_elmo(0)
    with pytest.raises(ValueError, match=r"module must be an hf_ctx ElmoModel"):
        Elmo(None, None, 1, module=torch.nn.LSTM(2, 2))
    with pytest.raises(ValueError, match=r"inputs must be character ids of shape \(batch, timesteps, 50\)"):
        fixture_elmo(1)(torch.zeros(2, 50, dtype=torch.long))
    with pytest.raises(ValueError, match=r"word_inputs has shape \(2, 3\), expected .* \(2, 7\)"):
        fixture_elmo(1, vocab_to_cache=["a"])(batch_to_ids(SENTENCES), torch.zeros(2, 3, dtype=torch.long))


# --- ElmoEmbedder: allennlp/tests/commands/elmo_test.py ------------------------------------------------------

SENTENCE = "Michael went to the store to buy some eggs ."


@pytest.fixture(scope="module")
def embedder():
    return ElmoEmbedder(options_file=OPTIONS, weight_file=WEIGHTS)


def embed_lines(embedder, tmp_path, lines, **kwargs):
    """Write `lines` to a file, embed it, and return the output file's path."""
    sentences_path, output_path = tmp_path / "sentences.txt", tmp_path / "output.hdf5"
    sentences_path.write_text("".join(line + "\n" for line in lines))
    with open(sentences_path, encoding="utf-8") as input_file:  # AllenNLP's embed_file took an open file
        embedder.embed_file(input_file, str(output_path), **kwargs)
        assert input_file.closed
    return output_path


@pytest.mark.parametrize("output_format", ["all", "top", "average"])
def test_embedding_works(embedder, tmp_path, output_format):
    """test_all_embedding_works, test_top_embedding_works, test_average_embedding_works: adapted from the
    `allennlp elmo` command line to `embed_file`, which `hf-ctx embed` runs."""
    output_path = embed_lines(embedder, tmp_path, [SENTENCE], output_format=output_format)
    expected_embedding = embedder.embed_sentence(SENTENCE.split())
    expected_embedding = {
        "all": expected_embedding,
        "top": expected_embedding[2],
        "average": (expected_embedding[0] + expected_embedding[1] + expected_embedding[2]) / 3,
    }[output_format]
    with h5py.File(output_path, "r") as h5py_file:
        assert set(h5py_file.keys()) == {"0", "sentence_to_index"}
        embedding = h5py_file.get("0")
        assert embedding.shape == expected_embedding.shape
        assert embedding.shape[-2:] == (len(SENTENCE.split()), 32)
        np.testing.assert_allclose(embedding, expected_embedding, rtol=1e-4)
        assert json.loads(h5py_file.get("sentence_to_index")[0]) == {SENTENCE: "0"}


BATCH = [
    SENTENCE,
    "Joel rolled down the street on his skateboard .",
    "test / this is a first sentence",
    "Take a look , then , at Tuesday 's elections in New York City , New Jersey and Virginia :",
]


def test_batch_embedding_works(embedder, tmp_path):
    """Taken (through embed_file)."""
    with h5py.File(embed_lines(embedder, tmp_path, BATCH), "r") as h5py_file:
        assert set(h5py_file.keys()) == {"0", "1", "2", "3", "sentence_to_index"}
        for sentence_id, sentence in zip(["0", "1", "2", "3"], BATCH):
            assert h5py_file.get(sentence_id).shape == (3, len(sentence.split()), 32)
        assert json.loads(h5py_file.get("sentence_to_index")[0]) == {BATCH[i]: str(i) for i in range(len(BATCH))}


def test_batch_embedding_works_with_forget_sentences(embedder, tmp_path):
    """Taken (through embed_file)."""
    with h5py.File(embed_lines(embedder, tmp_path, BATCH, forget_sentences=True), "r") as h5py_file:
        assert set(h5py_file.keys()) == {"0", "1", "2", "3"}
        for sentence_id, sentence in zip(["0", "1", "2", "3"], BATCH):
            assert h5py_file.get(sentence_id).shape == (3, len(sentence.split()), 32)


def test_duplicate_sentences(embedder, tmp_path):
    """Taken (through embed_file)."""
    with h5py.File(embed_lines(embedder, tmp_path, [SENTENCE, SENTENCE]), "r") as h5py_file:
        assert len(h5py_file.keys()) == 3
        assert set(h5py_file.keys()) == {"0", "1", "sentence_to_index"}
        for sentence_id in ["0", "1"]:
            assert h5py_file.get(sentence_id).shape == (3, len(SENTENCE.split()), 32)


def test_empty_sentences_raise_errors(embedder, tmp_path):
    """Taken: ValueError for AllenNLP's ConfigurationError."""
    with pytest.raises(ValueError, match=r"lines 2, 3 are empty"):
        embed_lines(embedder, tmp_path, ["A", "", "", "B"])


def test_lines_are_split_on_whitespace_as_allennlp_did(embedder, tmp_path):
    """AllenNLP's `elmo` command read tokenized text: "world!" stays one word (a raw-text splitter makes two)."""
    with h5py.File(embed_lines(embedder, tmp_path, ["Hello, world!"], output_format="top"), "r") as h5py_file:
        assert h5py_file["0"].shape == (2, 32)


def test_sentences_as_keys_are_refused(embedder, tmp_path):
    with pytest.raises(ValueError, match=r"use_sentence_keys=True is not supported"):
        embed_lines(embedder, tmp_path, BATCH[:2], use_sentence_keys=True)


def test_embeddings_are_as_expected(embedder):
    """Adapted from TestElmoEmbedder: all 30 sentences in TensorFlow's batches of 3, compared with TensorFlow's
    vectors for batch 0 only (TensorFlow's later batches started from the states the previous one left)."""
    loaded_sentences, loaded_embeddings = load_sentences_embeddings()
    sentences, expected_embeddings = [], []
    for batch_number in range(len(loaded_sentences[0])):
        for index in range(3):
            sentences.append(loaded_sentences[index][batch_number].split())
            expected_embeddings.append(loaded_embeddings[index][batch_number])
    embeddings = list(embedder.embed_sentences(sentences, 3))
    assert len(embeddings) == len(sentences)
    for tensor, words in zip(embeddings, sentences):
        assert tensor.shape == (3, len(words), 32) and tensor.dtype == np.float32
    for tensor, expected in zip(embeddings[:3], expected_embeddings[:3]):
        np.testing.assert_array_almost_equal(tensor[2], expected)


def test_embed_batch_is_empty_sentence(embedder):
    """Adapted: AllenNLP returned (3, 0, 1024) whatever the model's width; this model's is 32."""
    assert embedder.embed_sentence([]).shape == (3, 0, 32)


def test_embed_batch_contains_empty_sentence(embedder):
    """Taken; added: the shapes."""
    embeddings = list(embedder.embed_sentences(["This is a test".split(), []]))
    assert len(embeddings) == 2
    assert [e.shape for e in embeddings] == [(3, 4, 32), (3, 0, 32)]


def test_batch_to_embeddings_and_embed_batch_agree(embedder):
    sentences = [SENTENCE.split(), ["Hello", "!"]]
    activations, mask = embedder.batch_to_embeddings(sentences)
    assert activations.shape == (2, 3, 10, 32) and mask.sum(dim=1).tolist() == [10, 2]
    for i, vectors in enumerate(embedder.embed_batch(sentences)):
        np.testing.assert_allclose(activations[i, :, : len(sentences[i])].numpy(), vectors, atol=1e-6)


def test_embedder_errors_say_what_to_do():
    with pytest.raises(ValueError, match=r"hf_ctx downloads nothing. Fetch elmo_2x4096"):
        ElmoEmbedder()
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"cuda_device=0 asks for a GPU, but this machine"):
            ElmoEmbedder(OPTIONS, WEIGHTS, cuda_device=0)
