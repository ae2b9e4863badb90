"""Pretraining examples from raw text: BERT's sentence pairs, packed sequences, reading files, bad input, metrics.

The corpora here number every token ("w0", "w1", ... in reading order, one vocabulary id each), so an example's
ids say exactly where in which document each of its tokens came from.
"""

import logging
import math

import numpy as np
import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import torch
from datasets import Dataset
from transformers import BertTokenizer, EvalPrediction

from hf_ctx.data.pretraining import (
    build_pretraining_dataset,
    compute_pretraining_metrics,
    create_nsp_examples,
    preprocess_pretraining_logits,
    split_long_segments,
    tokenize_documents,
    truncate_pair,
)
from hf_ctx.data.text import load_text_documents

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, CLS, SEP = 0, 2, 3
FIRST_WORD_ID = len(SPECIALS)


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(vocab={t: i for i, t in enumerate(SPECIALS + [f"w{i}" for i in range(6000)])})


def numbered_corpus(rng, num_documents, segments=(3, 12), segment_length=(2, 9), long_lines=()):
    """Documents (lists of lines) of consecutively numbered words; also the document of each word id.

    `long_lines`: (document, line, length) triples replacing a line by a longer one.
    """
    documents, document_of, word = [], {}, 0
    long_lines = {(d, l): n for d, l, n in long_lines}
    for d in range(num_documents):
        lines = []
        for l in range(int(rng.integers(*segments))):
            length = long_lines.get((d, l), int(rng.integers(*segment_length)))
            lines.append(" ".join(f"w{word + k}" for k in range(length)))
            for k in range(length):
                document_of[FIRST_WORD_ID + word + k] = d
            word += length
        documents.append(lines)
    return documents, document_of


def write_corpus(path, documents):
    path.write_text("\n\n".join("\n".join(lines) for lines in documents) + "\n", encoding="utf-8")
    return path


def as_dataset(documents):
    return Dataset.from_dict({"text": ["\n".join(lines) for lines in documents]})


def split_pair(example):
    ids, types = example["input_ids"], example["token_type_ids"]
    assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2, ids
    first_sep = ids.index(SEP)
    assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
    return ids[1:first_sep], ids[first_sep + 1 : -1]


def is_contiguous(ids):
    return all(b == a + 1 for a, b in zip(ids, ids[1:]))


def test_truncate_pair_trims_the_longer_segment_at_either_end():
    rng = np.random.default_rng(0)
    trimmed_front = trimmed_back = 0
    for _ in range(200):
        a, b = list(range(int(rng.integers(1, 40)))), list(range(100, 100 + int(rng.integers(1, 40))))
        original_a, original_b = list(a), list(b)
        truncate_pair(a, b, 20, rng)
        assert len(a) + len(b) <= 20 and a and b
        if len(original_a) + len(original_b) > 20:
            assert len(a) + len(b) == 20
            # Only the longer side loses tokens until both are about equal.
            assert abs(len(a) - len(b)) <= 1 or min(len(a), len(b)) == min(len(original_a), len(original_b))
        for kept, whole in [(a, original_a), (b, original_b)]:  # a contiguous slice: trimmed at the ends only
            start = whole.index(kept[0])
            assert whole[start : start + len(kept)] == kept
            trimmed_front += kept[0] != whole[0]
            trimmed_back += kept[-1] != whole[-1]
    assert trimmed_front > 50 and trimmed_back > 50  # both ends, at random


def test_split_long_segments_keeps_every_token_in_balanced_pieces():
    segments = [list(range(5)), list(range(100, 161)), list(range(200, 214))]
    pieces = split_long_segments(segments, max_length=13, piece_length=6)
    assert pieces[0] == segments[0]
    assert sum(pieces, []) == sum(segments, [])
    assert all(len(p) <= 6 for p in pieces[1:])
    assert {len(p) for p in pieces[1:-3]} == {5, 6} and {len(p) for p in pieces[-3:]} == {4, 5}  # balanced


def test_nsp_pairs_follow_bert(tokenizer, tmp_path):
    rng = np.random.default_rng(1)
    documents, document_of = numbered_corpus(rng, 60)
    examples = build_pretraining_dataset(
        [write_corpus(tmp_path / "corpus.txt", documents)],
        tokenizer,
        max_seq_length=32,
        short_seq_prob=0.0,
        seed=3,
        cache_dir=str(tmp_path / "cache"),
    )
    assert set(examples.column_names) == {"input_ids", "token_type_ids", "next_sentence_label"}
    seen, is_next = set(), []
    for example in examples:
        assert len(example["input_ids"]) <= 32
        tokens_a, tokens_b = split_pair(example)
        assert tokens_a and tokens_b and is_contiguous(tokens_a) and is_contiguous(tokens_b)
        assert len({document_of[t] for t in tokens_a}) == 1 and len({document_of[t] for t in tokens_b}) == 1
        if example["next_sentence_label"] == 0:  # IsNext: B continues A's document after A
            assert document_of[tokens_b[0]] == document_of[tokens_a[0]] and tokens_b[0] > tokens_a[-1]
            seen.update(tokens_b)
        else:  # NotNext: B comes from another document
            assert document_of[tokens_b[0]] != document_of[tokens_a[0]]
        seen.update(tokens_a)
        is_next.append(example["next_sentence_label"] == 0)
    # BERT's sampling: half of the multi-segment chunks keep their continuation; one-segment chunks never do.
    assert 0.3 < np.mean(is_next) < 0.55
    # Each segment is used as A or as IsNext B; only truncation at the pair's ends drops tokens.
    assert len(seen) / len(document_of) > 0.9


def test_not_next_segments_come_from_every_other_document_only(tokenizer):
    documents, document_of = numbered_corpus(np.random.default_rng(6), 3, segments=(15, 25))
    examples = build_pretraining_dataset(as_dataset(documents), tokenizer, max_seq_length=24)
    pairs = set()
    for example in examples:
        tokens_a, tokens_b = split_pair(example)
        if example["next_sentence_label"] == 1:
            pairs.add((document_of[tokens_a[0]], document_of[tokens_b[0]]))
    assert pairs == {(a, b) for a in range(3) for b in range(3) if a != b}


def test_short_sequence_probability_shortens_examples(tokenizer):
    documents, _ = numbered_corpus(np.random.default_rng(2), 40)
    tokenized = tokenize_documents(as_dataset(documents), tokenizer)

    def mean_length(short_seq_prob):
        examples = create_nsp_examples(tokenized, tokenizer, max_seq_length=64, short_seq_prob=short_seq_prob)
        return np.mean([len(ids) for ids in examples["input_ids"]])

    assert mean_length(1.0) < 0.75 * mean_length(0.0)


def test_pairs_depend_on_the_seed_only_not_on_batching_or_processes(tokenizer):
    documents, _ = numbered_corpus(np.random.default_rng(3), 30)
    tokenized = tokenize_documents(as_dataset(documents), tokenizer)
    one = create_nsp_examples(tokenized, tokenizer, max_seq_length=32, seed=5)
    two = create_nsp_examples(tokenized, tokenizer, max_seq_length=32, seed=5, num_proc=2)
    other_seed = create_nsp_examples(tokenized, tokenizer, max_seq_length=32, seed=6)
    assert one["input_ids"] == two["input_ids"] and one["next_sentence_label"] == two["next_sentence_label"]
    assert one["input_ids"] != other_seed["input_ids"]


def test_long_lines_are_split_not_truncated(tokenizer, tmp_path):
    documents, document_of = numbered_corpus(np.random.default_rng(4), 20, long_lines=[(0, 1, 150), (5, 0, 90)])
    examples = build_pretraining_dataset(as_dataset(documents), tokenizer, max_seq_length=32)
    for example in examples:
        tokens_a, tokens_b = split_pair(example)
        assert len(example["input_ids"]) <= 32 and is_contiguous(tokens_a) and is_contiguous(tokens_b)
    packed = build_pretraining_dataset(as_dataset(documents), tokenizer, objective="mlm", max_seq_length=32)
    assert max(len(ids) for ids in packed["input_ids"]) <= 32
    kept = [t for ids in packed["input_ids"] for t in ids if t not in (CLS, SEP)]
    assert kept == sorted(document_of)  # every token of the long lines is kept, in order


def test_packed_sequences_keep_every_token_once_in_order(tokenizer, tmp_path):
    documents, document_of = numbered_corpus(np.random.default_rng(5), 50)
    packed = build_pretraining_dataset(
        [write_corpus(tmp_path / "corpus.txt", documents)],
        tokenizer,
        objective="mlm",
        max_seq_length=48,
        cache_dir=str(tmp_path / "cache"),
    )
    assert packed.column_names == ["input_ids", "token_type_ids"]
    lengths = [len(ids) for ids in packed["input_ids"]]
    assert max(lengths) <= 48 and np.mean(lengths[:-1]) > 40  # lines packed up to the block size
    boundaries, kept = 0, []
    for ids, types in zip(packed["input_ids"], packed["token_type_ids"]):
        assert ids[0] == CLS and ids[-1] == SEP and not any(types)
        for position in range(2, len(ids) - 1):
            if ids[position] == SEP:  # inside a sequence, [SEP] marks a document boundary
                boundaries += 1
                assert document_of[ids[position - 1]] + 1 == document_of[ids[position + 1]]
        kept += [t for t in ids if t not in (CLS, SEP)]
    assert kept == sorted(document_of)
    assert 0 < boundaries < len(documents)


def test_reading_files_blank_lines_whitespace_crlf_and_bom(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes("\ufeffone\r\ntwo\r\n \t \r\nthree\n\n\n  four  \n".encode())
    second = tmp_path / "b.txt"
    second.write_text("five\nsix")
    documents = load_text_documents([path, second], cache_dir=str(tmp_path / "cache"))
    assert documents["text"] == ["one\ntwo", "three", "four", "five\nsix"]  # a file's end ends a document
    by_line = load_text_documents([path], document_boundary="line", cache_dir=str(tmp_path / "cache"))
    assert by_line["text"] == ["one", "two", "three", "four"]


def test_the_cache_follows_file_changes(tokenizer, tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("w1 w2\nw3\n\nw4 w5\nw6 w7\n")
    cache = str(tmp_path / "cache")
    first = build_pretraining_dataset([path], tokenizer, max_seq_length=16, cache_dir=cache)
    again = build_pretraining_dataset([path], tokenizer, max_seq_length=16, cache_dir=cache)
    assert again.cache_files == first.cache_files  # read from the cache
    path.write_text("w8 w9\nw10\n\nw11\nw12 w13\n")
    changed = build_pretraining_dataset([path], tokenizer, max_seq_length=16, cache_dir=cache)
    assert FIRST_WORD_ID + 8 in sum(changed["input_ids"], [])


def test_bad_input_is_a_clear_error(tokenizer, tmp_path, caplog):
    cache = str(tmp_path / "cache")
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n\n")
    with pytest.raises(ValueError, match=r"empty\.txt holds no text"):
        load_text_documents([empty], cache_dir=cache)
    broken = tmp_path / "broken.txt"
    broken.write_bytes(b"fine line\nalso fine\nbad \xff\xfe byte\n")
    with pytest.raises(ValueError, match=r"broken\.txt:3: not valid UTF-8"):
        load_text_documents([broken], cache_dir=cache)
    with pytest.raises(FileNotFoundError, match="missing"):
        load_text_documents([tmp_path / "missing.txt"], cache_dir=cache)
    with pytest.raises(ValueError, match="document_boundary"):
        load_text_documents([broken], document_boundary="paragraph")

    one_document = tmp_path / "one.txt"
    one_document.write_text("w1 w2\nw3 w4\nw5\n")
    with (
        caplog.at_level(logging.WARNING, logger="hf_ctx"),
        pytest.raises(ValueError, match="at least 2 documents"),
    ):
        build_pretraining_dataset([one_document], tokenizer, cache_dir=cache)
    assert "no blank line" in caplog.text
    one_line_each = as_dataset([["w1 w2"], ["w3"], ["w4 w5"]])
    with pytest.raises(ValueError, match="no IsNext pair"):
        build_pretraining_dataset(one_line_each, tokenizer)
    assert len(build_pretraining_dataset(one_line_each, tokenizer, objective="mlm")) == 1  # fine without NSP

    with pytest.raises(ValueError, match="every document is empty"):
        build_pretraining_dataset(Dataset.from_dict({"text": ["", "  \n ", None]}), tokenizer)
    with pytest.raises(ValueError, match="no column 'content'"):
        build_pretraining_dataset(one_line_each, tokenizer, text_column="content")
    with pytest.raises(ValueError, match="objective"):
        build_pretraining_dataset(one_line_each, tokenizer, objective="clm")
    with pytest.raises(ValueError, match="max_seq_length"):
        build_pretraining_dataset(as_dataset([["w1 w2", "w3"], ["w4"]]), tokenizer, max_seq_length=4)


def test_metrics_match_a_direct_computation():
    generator = torch.Generator().manual_seed(0)
    batch, length, vocab = 6, 10, 30
    logits = torch.randn(batch, length, vocab, generator=generator)
    labels = torch.randint(0, vocab, (batch, length), generator=generator)
    labels[torch.rand(batch, length, generator=generator) > 0.3] = -100
    nsp_logits = torch.randn(batch, 2, generator=generator)
    nsp_labels = torch.randint(0, 2, (batch,), generator=generator)

    labelled = labels != -100
    log_probs = torch.log_softmax(logits.double(), -1)
    expected_nll = -log_probs[labelled].gather(1, labels[labelled][:, None]).mean().item()
    expected = {
        "mlm_accuracy": (logits.argmax(-1) == labels)[labelled].double().mean().item(),
        "mlm_perplexity": math.exp(expected_nll),
        "nsp_accuracy": (nsp_logits.argmax(-1) == nsp_labels).double().mean().item(),
    }
    # Dense (B, T, V) logits and sparse (N, V) logits of the labelled positions give the same metrics.
    for prediction_logits in (logits, logits[labelled]):
        reduced = preprocess_pretraining_logits((prediction_logits, nsp_logits), (labels, nsp_labels))
        predictions = tuple(t.numpy() for t in reduced)
        metrics = compute_pretraining_metrics(EvalPrediction(predictions, (labels.numpy(), nsp_labels.numpy())))
        assert metrics == pytest.approx(expected, rel=1e-5)
    mlm_only = compute_pretraining_metrics(EvalPrediction(predictions, labels.numpy()))
    assert set(mlm_only) == {"mlm_accuracy", "mlm_perplexity"}


def test_split_sentences_gives_one_segment_a_sentence(tokenizer):
    documents = Dataset.from_dict({"text": ["One two. Three four!\nfive six", "Seven."]})
    whole = tokenize_documents(documents, tokenizer)
    split = tokenize_documents(documents, tokenizer, split_sentences=True)
    assert [len(segments) for segments in whole["segments"]] == [2, 1]
    assert [len(segments) for segments in split["segments"]] == [3, 1]
    # The same tokens in the same order, only cut at the sentence ends.
    assert [t for segment in split["segments"][0] for t in segment] == [
        t for segment in whole["segments"][0] for t in segment
    ]


def test_random_documents_are_split_lazily_as_split_long_segments_does():
    """NotNext segments come from Arrow rows converted piece by piece; they must equal the eager split."""
    import pyarrow as pa

    from hf_ctx.data.pretraining import _LazySplitSegments

    rng = np.random.default_rng(0)
    for _ in range(20):
        segments = [rng.integers(0, 100, int(rng.integers(1, 30))).tolist() for _ in range(int(rng.integers(1, 8)))]
        arrow = pa.array([segments], type=pa.list_(pa.list_(pa.int32())))[0].values
        lazy, eager = _LazySplitSegments(arrow, 10, 5), split_long_segments(segments, 10, 5)
        assert len(lazy) == len(eager)
        for start in range(len(eager)):
            assert list(lazy[start:]) == eager[start:]
