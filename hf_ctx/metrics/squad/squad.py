"""Exact match and F1 of extractive question answering, as the official SQuAD v1.1 and v2.0 evaluation scripts
compute them.

An `evaluate` metric module shipped inside hf_ctx, so it loads offline:

    >>> from hf_ctx.metrics import load_metric
    >>> squad = load_metric("squad")
    >>> squad.compute(
    ...     predictions=[{"id": "q1", "prediction_text": "the Denver Broncos"}],
    ...     references=[{"id": "q1", "answers": {"text": ["Denver Broncos"], "answer_start": [177]}}],
    ... )
    {'exact_match': 100.0, 'f1': 100.0}

Answers are compared after normalisation: lower case, punctuation removed, the articles "a", "an", "the" removed,
whitespace collapsed. Exact match is 1 when the normalised texts are equal; F1 is the harmonic mean of precision
and recall of the normalised answers' word tokens (a bag: shared tokens counted with multiplicity). Each
question scores the maximum over its reference answers; the scores are averages over questions, in percent.

`load_metric("squad_v2")` (the configuration "squad_v2" of this module) scores SQuAD 2.0, where a question may
have no answer: the empty prediction is right for it (exact match and F1 1) and wrong for the others (0). It
adds the scores over answerable ("HasAns_") and unanswerable ("NoAns_") questions, and, from the predictions'
`no_answer_probability`, the best scores any threshold on that probability would give ("best_exact",
"best_f1", with their thresholds), as the official v2.0 script does.
"""

import collections
import re
import string

import datasets
import evaluate

_CITATION = """\
@inproceedings{rajpurkar-etal-2016-squad,
    title = "{SQ}u{AD}: 100,000+ Questions for Machine Comprehension of Text",
    author = "Rajpurkar, Pranav and Zhang, Jian and Lopyrev, Konstantin and Liang, Percy",
    booktitle = "Proceedings of EMNLP",
    year = "2016",
}
@inproceedings{rajpurkar-etal-2018-know,
    title = "Know What You Don{'}t Know: Unanswerable Questions for {SQ}u{AD}",
    author = "Rajpurkar, Pranav and Jia, Robin and Liang, Percy",
    booktitle = "Proceedings of ACL",
    year = "2018",
}
"""

_DESCRIPTION = """\
Exact match and token-overlap F1 of predicted answer texts against reference answers, as the official SQuAD
v1.1 evaluation script computes them; the configuration "squad_v2" follows the SQuAD 2.0 script.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: one dict per question: {"id": str, "prediction_text": str}; for "squad_v2" also
        "no_answer_probability" (float; 0.0 when unknown), and "" as the prediction text means "no answer".
    references: one dict per question: {"id": str, "answers": {"text": [str, ...], "answer_start": [int, ...]}};
        for "squad_v2" an unanswerable question has empty lists.
    no_answer_threshold ("squad_v2"): predictions whose no_answer_probability exceeds it count as "no answer"
        (default 1.0: the prediction texts are used as given).
Returns:
    "squad": {"exact_match", "f1"}, in percent.
    "squad_v2": {"exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1",
    "NoAns_total", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"}; scores in percent, the
    HasAns_/NoAns_ ones only when such questions are present.
Example:
    >>> squad.compute(predictions=[{"id": "1", "prediction_text": "a big cat"}],
    ...               references=[{"id": "1", "answers": {"text": ["cat", "big dog"], "answer_start": [0, 0]}}])
    {'exact_match': 0.0, 'f1': 66.66666666666667}
"""

CONFIG_NAMES = ("default", "squad", "squad_v2")


def normalize_answer(text: str) -> str:
    """Lower case, remove punctuation, the articles a/an/the, and extra whitespace (the official scripts')."""
    text = "".join(char for char in text.lower() if char not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match_score(prediction: str, reference: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(reference))


def f1_score(prediction: str, reference: str) -> float:
    """Token-overlap F1 of the normalised texts. Where either has no tokens it is 1 if both have none, else 0
    (SQuAD 2.0's rule; v1.1 references are never empty, so v1.1 scores are the same)."""
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not predicted or not gold:
        return float(predicted == gold)
    same = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def best_over_references(score, prediction: str, references: list[str]) -> float:
    return max(score(prediction, reference) for reference in references)


def _paired(predictions, references) -> list[tuple[dict, dict]]:
    """(prediction, reference) per question id; every id once on each side."""
    by_id = {}
    for prediction in predictions:
        if prediction["id"] in by_id:
            raise ValueError(f"question id {prediction['id']!r} is predicted twice")
        by_id[prediction["id"]] = prediction
    pairs, seen = [], set()
    for reference in references:
        qid = reference["id"]
        if qid in seen:
            raise ValueError(f"question id {qid!r} has two references")
        seen.add(qid)
        if qid not in by_id:
            raise ValueError(f"question id {qid!r} has no prediction")
        pairs.append((by_id[qid], reference))
    extra = sorted(set(by_id) - seen)
    if extra:
        raise ValueError(f"{len(extra)} prediction(s) for questions without a reference, e.g. {extra[0]!r}")
    return pairs


def _best_threshold(raw: dict[str, float], no_answer_probability: dict, has_answer: dict, predicted: dict):
    """The best score (percent) over thresholds on the no-answer probability, and that threshold: the official
    v2.0 script's `find_best_thresh`."""
    score = best = sum(not has for has in has_answer.values())  # every question answered "no answer"
    threshold = 0.0
    for qid in sorted(no_answer_probability, key=no_answer_probability.get):
        if has_answer[qid]:
            score += raw[qid]
        else:
            score += -1 if predicted[qid] else 0
        if score > best:
            best, threshold = score, no_answer_probability[qid]
    return 100.0 * best / len(raw), threshold


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Squad(evaluate.Metric):
    def _info(self):
        if self.config_name not in CONFIG_NAMES:
            raise ValueError(f"unknown SQuAD metric configuration {self.config_name!r}; choose one of {CONFIG_NAMES}")
        prediction = {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")}
        if self.config_name == "squad_v2":
            prediction["no_answer_probability"] = datasets.Value("float32")
        answers = datasets.Sequence({"text": datasets.Value("string"), "answer_start": datasets.Value("int32")})
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": prediction, "references": {"id": datasets.Value("string"), "answers": answers}}
            ),
            reference_urls=["https://rajpurkar.github.io/SQuAD-explorer/"],
        )

    def _compute(self, predictions, references, no_answer_threshold: float = 1.0):
        pairs = _paired(predictions, references)
        if not pairs:
            raise ValueError("no predictions to score")
        if self.config_name != "squad_v2":
            exact, f1 = 0.0, 0.0
            for prediction, reference in pairs:
                gold = reference["answers"]["text"]
                if not gold:
                    raise ValueError(
                        f"question id {reference['id']!r} has no reference answer; SQuAD 2.0 data is scored by "
                        'load_metric("squad_v2")'
                    )
                exact += best_over_references(exact_match_score, prediction["prediction_text"], gold)
                f1 += best_over_references(f1_score, prediction["prediction_text"], gold)
            return {"exact_match": 100.0 * exact / len(pairs), "f1": 100.0 * f1 / len(pairs)}
        return self._compute_v2(pairs, no_answer_threshold)

    @staticmethod
    def _compute_v2(pairs, no_answer_threshold: float) -> dict[str, float]:
        raw_exact, raw_f1, has_answer, no_answer_probability, predicted = {}, {}, {}, {}, {}
        for prediction, reference in pairs:
            qid = reference["id"]
            # As the official script: references that normalise to nothing do not count; none left means "no answer".
            gold = [text for text in reference["answers"]["text"] if normalize_answer(text)] or [""]
            has_answer[qid] = gold != [""]
            raw_exact[qid] = best_over_references(exact_match_score, prediction["prediction_text"], gold)
            raw_f1[qid] = best_over_references(f1_score, prediction["prediction_text"], gold)
            no_answer_probability[qid] = float(prediction["no_answer_probability"])
            predicted[qid] = prediction["prediction_text"]

        def thresholded(raw):
            return {
                qid: float(not has_answer[qid]) if no_answer_probability[qid] > no_answer_threshold else score
                for qid, score in raw.items()
            }

        exact, f1 = thresholded(raw_exact), thresholded(raw_f1)
        result = {
            "exact": 100.0 * sum(exact.values()) / len(exact),
            "f1": 100.0 * sum(f1.values()) / len(f1),
            "total": len(exact),
        }
        for prefix, wanted in (("HasAns", True), ("NoAns", False)):
            ids = [qid for qid, has in has_answer.items() if has == wanted]
            if ids:
                result[f"{prefix}_exact"] = 100.0 * sum(exact[qid] for qid in ids) / len(ids)
                result[f"{prefix}_f1"] = 100.0 * sum(f1[qid] for qid in ids) / len(ids)
                result[f"{prefix}_total"] = len(ids)
        result["best_exact"], result["best_exact_thresh"] = _best_threshold(
            raw_exact, no_answer_probability, has_answer, predicted
        )
        result["best_f1"], result["best_f1_thresh"] = _best_threshold(
            raw_f1, no_answer_probability, has_answer, predicted
        )
        return result
