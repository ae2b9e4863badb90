"""SQuAD metric module: hand-computed exact match and F1 (v1.1), and SQuAD 2.0's no-answer scores and
thresholds."""

import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
pytest.importorskip("evaluate")

from hf_ctx.metrics import load_metric


def refs(*answer_lists):
    return [
        {"id": str(i), "answers": {"text": list(a), "answer_start": [0] * len(a)}} for i, a in enumerate(answer_lists)
    ]


def preds(*texts, probabilities=None):
    rows = [{"id": str(i), "prediction_text": t} for i, t in enumerate(texts)]
    for row, p in zip(rows, probabilities or ()):
        row["no_answer_probability"] = p
    return rows


def squad(predictions, references, **kwargs):
    return load_metric("squad").compute(predictions=predictions, references=references, **kwargs)


def test_normalisation_ignores_case_punctuation_articles_and_spaces():
    result = squad(preds("The  Denver Broncos!", "an apple"), refs(["denver broncos"], ["Apple."]))
    assert result == {"exact_match": 100.0, "f1": 100.0}


def test_f1_by_hand_and_the_best_reference_counts():
    # "a big cat" -> ["big", "cat"]; against "cat": P 1/2, R 1, F1 2/3; against "big dog": P 1/2 R 1/2, F1 1/2.
    result = squad(preds("a big cat"), refs(["cat", "big dog"]))
    assert result == {"exact_match": 0.0, "f1": pytest.approx(100 * 2 / 3)}
    # Tokens are a bag: "cat cat dog" vs "cat dog dog": 2 shared of 3 each, F1 2/3. A miss scores 0.
    # Over the two questions: EM 0, F1 (2/3 + 0) / 2.
    result = squad(preds("cat cat dog", "fish"), refs(["cat dog dog"], ["bird"]))
    assert result == {"exact_match": 0.0, "f1": pytest.approx(100 * 1 / 3)}
    # One exact match of three questions, the other two disjoint: EM 1/3, F1 1/3.
    result = squad(preds("Paris", "x", "y"), refs(["paris", "lyon"], ["z"], ["w"]))
    assert result == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 / 3)}
    # An empty prediction gets nothing.
    assert squad(preds(""), refs(["cat"])) == {"exact_match": 0.0, "f1": 0.0}


def test_ids_must_pair_one_to_one():
    with pytest.raises(ValueError, match="question id '1' has no prediction"):
        squad(preds("a", "b")[:1] + [{"id": "5", "prediction_text": "b"}], refs(["a"], ["b"]))
    with pytest.raises(ValueError, match="predicted twice"):
        squad(preds("a") * 2, refs(["a"], ["b"]))
    with pytest.raises(ValueError, match=r"has no reference answer; SQuAD 2.0 data is scored by load_metric\("):
        squad(preds("a"), refs([]))


def test_squad_v2_has_answer_and_no_answer_scores():
    v2 = load_metric("squad_v2")
    # q0 answerable, predicted right; q1 answerable, half right (F1 2/3, as above); q2 unanswerable, predicted
    # empty (right); q3 unanswerable, predicted a span (wrong).
    result = v2.compute(
        predictions=preds("cat", "a big cat", "", "dog", probabilities=[0.1, 0.2, 0.9, 0.3]),
        references=refs(["Cat"], ["cat"], [], []),
    )
    assert result["total"] == 4 and result["HasAns_total"] == 2 and result["NoAns_total"] == 2
    assert result["HasAns_exact"] == 50.0 and result["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert result["NoAns_exact"] == 50.0 and result["NoAns_f1"] == 50.0
    assert result["exact"] == 50.0 and result["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 4)
    # Thresholds, questions in order of no-answer probability: all "no answer" scores 2 (the NoAns ones);
    # answering q0 (0.1): 3; then q1 (0.2): exact +0 / F1 +2/3; q3 (0.3) predicted a span: -1; q2: empty, +0.
    assert result["best_exact"] == 75.0 and result["best_exact_thresh"] == pytest.approx(0.1)
    assert result["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4) and result["best_f1_thresh"] == pytest.approx(0.2)
    # Above the threshold a prediction counts as "no answer": q1 and q2 (0.9) then; q1 loses its 2/3.
    result = v2.compute(
        predictions=preds("cat", "a big cat", "", "dog", probabilities=[0.1, 0.95, 0.9, 0.3]),
        references=refs(["Cat"], ["cat"], [], []),
        no_answer_threshold=0.5,
    )
    assert result["exact"] == 50.0 and result["f1"] == 50.0


def test_unknown_configuration():
    with pytest.raises(ValueError, match="unknown SQuAD metric configuration 'squad3'"):
        load_metric("squad", "squad3")
