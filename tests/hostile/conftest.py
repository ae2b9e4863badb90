"""Fixtures of the held-out hostile cases: a tiny BERT and a tiny ELMo token classifier, in eval mode, with their
tokenizers."""

import pytest
from tiny_checkpoints import bert_token_classifier, elmo_token_classifier


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    model, tokenizer = bert_token_classifier(tmp_path_factory.mktemp("bert"))
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def elmo():
    model, tokenizer = elmo_token_classifier(None)
    return model.eval(), tokenizer
