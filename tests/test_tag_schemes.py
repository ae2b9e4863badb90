"""Tag schemes against independent references: every scheme's allowed transitions against brute-force
enumeration of well-formed sequences, conversions against entities written by hand, seqeval's strict and
conlleval readings, and strict scoring on hand-computed cases."""

import itertools
import random

import pytest
from seqeval import scheme as seqeval_schemes
from seqeval.metrics.sequence_labeling import get_entities

from hf_ctx.tag_schemes import (
    SCHEME_PREFIXES,
    TAG_SCHEMES,
    allowed_transitions,
    convert_tags,
    count_scheme_breaks,
    detect_tag_scheme,
    scheme_labels,
    seqeval_arguments,
)

TYPES = ("PER", "LOC")


def write_entity(scheme, entity_type, length, follows_same_type):
    """An entity's tags, written from each scheme's definition (independent of hf_ctx.tag_schemes)."""
    if scheme == "IOB1":
        return ["B" if follows_same_type else "I", *["I"] * (length - 1)]
    if scheme == "IOB2":
        return ["B", *["I"] * (length - 1)]
    last, unit = {"BIOES": ("E", "S"), "BIOUL": ("L", "U")}[scheme]
    return [unit] if length == 1 else ["B", *["I"] * (length - 2), last]


def segmentations(length):
    """Every way to lay entities of TYPES over `length` words: lists of (type, start, end)."""
    if length == 0:
        yield []
        return
    # The last word is O, or the last word of an entity of some type and length.
    for rest in segmentations(length - 1):
        yield rest
    for entity_length in range(1, length + 1):
        for entity_type in TYPES:
            for rest in segmentations(length - entity_length):
                yield [*rest, (entity_type, length - entity_length, length)]


def write(scheme, entities, length):
    tags, previous = ["O"] * length, None
    for entity_type, start, end in entities:
        follows = previous == (entity_type, start)
        prefixes = write_entity(scheme, entity_type, end - start, follows)
        tags[start:end] = [f"{p}-{entity_type}" for p in prefixes]
        previous = (entity_type, end)
    return tags


def well_formed(scheme, max_length):
    """{tag sequence: its entities} for every well-formed sequence of 1..max_length words."""
    return {
        tuple(write(scheme, entities, n)): entities for n in range(1, max_length + 1) for entities in segmentations(n)
    }


def labels_of(scheme):
    return dict(enumerate(["O", *(f"{p}-{t}" for t in TYPES for p in SCHEME_PREFIXES[scheme])]))


@pytest.mark.parametrize("scheme", TAG_SCHEMES)
def test_allowed_transitions_admit_exactly_the_well_formed_sequences(scheme):
    labels = labels_of(scheme)
    pairs, n = set(allowed_transitions(scheme, labels)), len(labels)
    allowed = set()
    for length in range(1, 5):
        for sequence in itertools.product(range(n), repeat=length):
            path = [n, *sequence, n + 1]
            if all(step in pairs for step in zip(path, path[1:])):
                allowed.add(tuple(labels[i] for i in sequence))
    expected = well_formed(scheme, 4)
    assert allowed == set(expected)
    assert len(allowed) > 100  # 4 words, 2 types: not a vacuous comparison


@pytest.mark.parametrize("scheme", TAG_SCHEMES)
def test_scheme_breaks_are_zero_exactly_for_the_well_formed_sequences(scheme):
    labels = list(labels_of(scheme).values())
    expected = well_formed(scheme, 3)
    for length in range(1, 4):
        for sequence in itertools.product(labels, repeat=length):
            breaks = count_scheme_breaks([list(sequence)], scheme)
            assert (breaks == 0) == (sequence in expected), sequence
    # Counted per transition and summed over sentences: O -> I-PER, I-PER -> I-LOC, and a sentence opened by I-LOC.
    if scheme == "IOB2":
        assert count_scheme_breaks([["O", "I-PER", "I-LOC"], ["I-LOC"], ["B-PER", "I-PER"]], scheme) == 3
    with pytest.raises(ValueError, match=r"tag prefix 'E' is not one IOB2 uses"):
        count_scheme_breaks([["E-PER"]], "IOB2")


@pytest.mark.parametrize("scheme,seqeval_class", [("IOB2", "IOB2"), ("BIOES", "IOBES"), ("BIOUL", "BILOU")])
def test_seqeval_strict_reads_the_hand_written_entities(scheme, seqeval_class):
    """The reference writer agrees with seqeval's strict reading of the scheme (a check on the test itself)."""
    for tags, entities in well_formed(scheme, 4).items():
        strict = seqeval_schemes.Tokens(list(tags), getattr(seqeval_schemes, seqeval_class)).entities
        assert [(e.tag, e.start, e.end) for e in strict] == entities


def test_bioul_transitions_by_hand():
    """AllenNLP's BIOUL constraints: O, L-x, U-x close; after B-x or I-x only I-x or L-x."""
    labels = {0: "O", 1: "B-PER", 2: "I-PER", 3: "L-PER", 4: "U-PER", 5: "B-LOC"}
    start, end = 6, 7
    expected = {(start, 0), (start, 1), (start, 4), (start, 5), (0, end), (3, end), (4, end)}
    for closed in (0, 3, 4):
        expected |= {(closed, 0), (closed, 1), (closed, 4), (closed, 5)}
    expected |= {(1, 2), (1, 3), (2, 2), (2, 3)}
    assert set(allowed_transitions("BIOUL", labels)) == expected
    assert allowed_transitions("BILOU", labels) == allowed_transitions("BIOUL", labels)


@pytest.mark.parametrize("source", TAG_SCHEMES)
def test_conversions_write_the_same_entities_and_round_trip(source):
    for length in range(1, 5):
        for entities in segmentations(length):
            tags = write(source, entities, length)
            for target in TAG_SCHEMES:
                converted = convert_tags(tags, source, target)
                assert converted == write(target, entities, length), (tags, source, target)
                assert convert_tags(converted, target, source) == tags


def conlleval_entities(tags):
    """seqeval's default reading (conlleval's); it knows E-/S-, so BIOUL is read through its BIOES twin."""
    return get_entities([{"L": "E", "U": "S"}.get(tag[0], tag[0]) + tag[1:] for tag in tags])


def test_ill_formed_input_converts_to_the_entities_conlleval_reads():
    rng = random.Random(0)
    for source in ("BIOES", "BIOUL"):
        labels = list(labels_of(source).values())
        for _ in range(300):
            tags = [rng.choice(labels) for _ in range(rng.randint(1, 6))]
            for target in TAG_SCHEMES:
                assert conlleval_entities(convert_tags(tags, source, target)) == conlleval_entities(tags)


def test_detection_labels_and_bad_input():
    assert detect_tag_scheme([["B-PER", "L-PER", "U-LOC"], ["O"]]) == "BIOUL"
    assert scheme_labels(["U-LOC"], "BILOU") == ["O", "B-LOC", "I-LOC", "L-LOC", "U-LOC"]
    with pytest.raises(ValueError, match="the tags mix the prefixes of BIOES and BIOUL"):
        detect_tag_scheme([["S-PER"], ["U-PER"]])
    with pytest.raises(ValueError, match="tag 'L-PER' has prefix 'L', which BIOES does not use"):
        convert_tags(["B-PER", "L-PER"], "BIOES", "IOB2")
    with pytest.raises(ValueError, match="prefix 'S', which BILOU does not use"):
        allowed_transitions("BILOU", {0: "O", 1: "S-PER"})


# --- scoring -----------------------------------------------------------------------------------------------


def scores(scheme, predictions, references):
    """`ner_metrics` for `scheme` on tag strings, through label ids as the Trainer passes them."""
    pytest.importorskip("evaluate")
    from transformers import EvalPrediction

    from hf_ctx.data.conll import ner_metrics

    id2label = dict(enumerate(sorted({t for s in predictions + references for t in s})))
    label2id = {label: i for i, label in enumerate(id2label.values())}
    width = max(map(len, references))

    def ids(rows, pad):
        return [[label2id[t] for t in row] + [pad] * (width - len(row)) for row in rows]

    return ner_metrics(id2label, scheme)(EvalPrediction(ids(predictions, 0), ids(references, -100)))


def test_bioul_is_scored_strictly_and_reads_unit_tags():
    references = [["U-PER", "U-PER", "O", "B-LOC", "L-LOC"]]
    predictions = [["U-PER", "U-PER", "O", "B-LOC", "I-LOC"]]
    # Gold: PER(0), PER(1), LOC(3-4). Predicted: the two PERs; B-LOC I-LOC never ends, so strict BILOU has no LOC.
    # (conlleval's reading would take U-PER U-PER for one entity and B-LOC I-LOC for a LOC.)
    result = scores("BILOU", predictions, references)
    assert result["precision"] == 1.0
    assert result["recall"] == pytest.approx(2 / 3)
    assert result["f1"] == pytest.approx(0.8)
    assert result["PER_f1"] == 1.0 and result["LOC_f1"] == 0.0
    assert seqeval_arguments("BIOUL") == {"mode": "strict", "scheme": "BILOU"}


def test_bioes_is_scored_strictly():
    references = [["B-PER", "E-PER", "S-LOC", "O"]]
    predictions = [["B-PER", "E-PER", "B-LOC", "O"]]  # an unclosed B-LOC: no entity under strict IOBES
    result = scores("BIOES", predictions, references)
    assert result["precision"] == 1.0 and result["recall"] == 0.5


def test_iob1_and_iob2_keep_conllevals_reading():
    """An entity that starts with I- still counts in IOB2, as conlleval (and seqeval's default) counts it."""
    assert seqeval_arguments("IOB2") == seqeval_arguments("BIO") == seqeval_arguments("IOB1") == {}
    result = scores("IOB2", [["O", "I-PER", "I-PER"]], [["O", "B-PER", "I-PER"]])
    assert result["f1"] == 1.0
    assert scores("IOB1", [["I-PER", "B-PER"]], [["I-PER", "B-PER"]])["f1"] == 1.0
