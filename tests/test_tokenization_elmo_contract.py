"""transformers' own tokenizer tests held against ElmoTokenizer: `TokenizerTesterMixin` of the installed
transformers (its tests/test_tokenization_common.py), every test of it run on a small word vocabulary, except those
named in NOT_APPLICABLE, each skipped with the reason it cannot apply to a word-level character tokenizer.

Where the tests come from: transformers' wheel ships no tests, its source distribution on PyPI does. The first run
downloads the source distribution of the installed version with pip (`pip download --no-deps --no-binary :all:
transformers==<version>`), keeps its three test files in a cache folder (`$XDG_CACHE_HOME/hf_ctx`, by default
~/.cache/hf_ctx) and reads them from there on later runs; where PyPI cannot be reached (and nothing is cached) the
tests skip, saying so. CI reaches PyPI, which it installs from. Why not a copy kept in the repository (as
tests/fixtures/allennlp_elmo is): the contract is the installed transformers' own, and CI's two suites run two
versions (the newest, and the oldest supported in .ci/oldest.txt), each held here to its own tests; a copy would
hold one version to the other's and go stale at each release.
"""

import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

import pytest

from hf_ctx import ElmoTokenizer

TEST_FILES = ["test_tokenization_common.py", "test_tokenizers_backend_mixin.py", "test_sentencepiece_backend_mixin.py"]
TRANSFORMERS_VERSION = importlib.metadata.version("transformers")
PACKAGE = "transformers_tokenizer_tests"  # the name the three files import as (they import each other relatively)


def cached_transformers_tests(version: str) -> Path:
    """The folder holding transformers `version`'s test files, downloaded on first use; skips where it cannot be."""
    cache = (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hf_ctx" / f"transformers-{version}-tests"
    )
    if all((cache / name).is_file() for name in TEST_FILES):
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache.parent) as download:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        try:
            subprocess.run(
                [*command, f"transformers=={version}", "--dest", download],
                capture_output=True,
                check=True,
                text=True,
                timeout=600,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            reason = (getattr(error, "stderr", None) or str(error)).strip().splitlines()[-1:]
            pytest.skip(f"transformers {version}'s tests need its source distribution from PyPI: {reason}", True)
        (sdist,) = Path(download).glob("transformers-*.tar.gz")
        staging = Path(download) / "tests"
        staging.mkdir()
        with tarfile.open(sdist) as archive:
            for name in TEST_FILES:
                member = archive.getmember(f"{sdist.name.removesuffix('.tar.gz')}/tests/{name}")
                (staging / name).write_bytes(archive.extractfile(member).read())
        (staging / "__init__.py").write_text("")
        try:
            staging.rename(cache)  # whole or not at all; a concurrent run may have put it there first
        except OSError:
            if not cache.is_dir():
                raise
    return cache


def import_tester_mixin():
    folder = cached_transformers_tests(TRANSFORMERS_VERSION)
    if PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[PACKAGE])
    return importlib.import_module(f"{PACKAGE}.test_tokenization_common").TokenizerTesterMixin


TokenizerTesterMixin = import_tester_mixin()

WORDS = ["</S>", "<S>", "<UNK>", "This", "is", "a", "test", "Encode", "this.", "Sequence", "the", "cat", "sat"]

# The tests that cannot apply, by name, with the reason; every other test of the mixin runs and passes.
PAIRS = "ELMo encodes single sentences: no sentence pairs (text_pair)"
CHARACTER_IDS = (
    "input_ids are character ids, max_characters_per_token of them per word, and a padding word is a row of 0s, "
    "where the test wants one vocabulary id per token (ElmoTokenizer's are input_word_ids) and pad_token_id"
)
BOUNDARIES = "ELMo's <S> and </S> have fixed character encodings in the model: no other bos_token or eos_token"
NOT_APPLICABLE = {
    "test_call": PAIRS,
    "test_mask_output": PAIRS,
    "test_number_of_added_tokens": PAIRS,
    "test_pretokenized_inputs": PAIRS,
    "test_special_tokens_mask_input_pairs": PAIRS,
    "test_maximum_encoding_length_pair_input": PAIRS,
    "test_internal_consistency": CHARACTER_IDS,
    "test_maximum_encoding_length_single_input": CHARACTER_IDS,
    "test_encode_basic_padding": CHARACTER_IDS,
    "test_encode_plus_with_padding_0": CHARACTER_IDS,
    "test_encode_plus_with_padding_1": CHARACTER_IDS,
    "test_padding_with_attention_mask": CHARACTER_IDS,
    "test_batch_encode_plus_padding": "left padding: ELMo's inputs are padded on the right, words first",
    "test_bos_token_with_add_bos_token_true": BOUNDARIES,
    "test_bos_token_with_add_bos_token_false": BOUNDARIES,
    "test_added_tokens_serialization": BOUNDARIES,
    "test_pad_token_initialization": "pad_token must be a word of the vocabulary: its id pads input_word_ids",
    "test_batch_encode_dynamic_overflowing": "no overflowing windows: the model reads a sentence whole",
}


class ElmoTokenizerContractTest(TokenizerTesterMixin, unittest.TestCase):
    tokenizer_class = ElmoTokenizer
    test_seq2seq = False
    test_tokenizer_from_extractor = False

    @classmethod
    def setUpClass(cls):
        # The mixin's own setUpClass reads a Hub checkpoint and a text fixture the source distribution lacks.
        cls.tmpdirname = tempfile.mkdtemp()
        ElmoTokenizer(vocab=WORDS).save_pretrained(cls.tmpdirname)
        cls.from_pretrained_id = [cls.tmpdirname]
        cls.tokenizers_list = [(ElmoTokenizer, cls.tmpdirname, {})]
        cls._data = "This is a test\nthe cat sat"

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmpdirname, ignore_errors=True)


for _name, _reason in NOT_APPLICABLE.items():
    setattr(ElmoTokenizerContractTest, _name, unittest.skip(_reason)(getattr(TokenizerTesterMixin, _name)))


def test_every_test_skipped_is_one_of_the_installed_mixin():
    """A test renamed or removed in a transformers release is not skipped here in silence."""
    assert [
        name for name in NOT_APPLICABLE if not name.startswith("test_") or not hasattr(TokenizerTesterMixin, name)
    ] == []
