"""Entity-level precision, recall and F1 for sequence labelling, computed by the `seqeval` library.

An `evaluate` metric module shipped inside hf_ctx, so it loads offline:

    >>> from hf_ctx.metrics import load_metric
    >>> seqeval = load_metric("seqeval")
    >>> seqeval.compute(predictions=[["B-PER", "I-PER", "O"]], references=[["B-PER", "I-PER", "O"]])["overall_f1"]
    1.0

An entity counts as found only when its type and both of its boundaries match, as in the CoNLL shared tasks'
`conlleval` script. The default (`mode=None`) reads chunks the way `conlleval` does, which accepts IOB1 and
IOB2 alike; `mode="strict"` with a `scheme` ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU") only counts
chunks that are well formed in that scheme.
"""

import datasets
import evaluate
from seqeval import scheme as seqeval_schemes
from seqeval.metrics import accuracy_score, classification_report

_CITATION = """\
@inproceedings{ramshaw-marcus-1995-text,
    title = "Text Chunking using Transformation-Based Learning",
    author = "Ramshaw, Lance and Marcus, Mitch",
    booktitle = "Third Workshop on Very Large Corpora",
    year = "1995",
}
@misc{seqeval,
    title = {{seqeval}: A Python framework for sequence labeling evaluation},
    author = {Hiroki Nakayama},
    year = {2018},
    url = {https://github.com/chakki-works/seqeval},
}
"""

_DESCRIPTION = """\
Entity-level precision, recall and F1 (per entity type and overall, micro-averaged) and token accuracy for
sequence labelling such as named-entity recognition, following the CoNLL-2000/2003 `conlleval` script.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of sentences, each a list of predicted tags (strings such as "B-PER", "I-LOC", "O").
    references: list of sentences, each a list of gold tags, one per predicted tag.
    suffix: tags carry their prefix at the end ("PER-B") instead of the start.
    scheme: with mode="strict", the tagging scheme: "IOB1", "IOB2", "IOE1", "IOE2", "IOBES" or "BILOU".
    mode: None (conlleval's lenient chunk reading) or "strict".
    sample_weight: optional weight per sentence.
    zero_division: value of a ratio whose denominator is 0: 0, 1 or "warn" (0 with a warning).
Returns:
    For every entity type found in the references or predictions, a dict with "precision", "recall", "f1" and
    "number" (gold entities of that type); and "overall_precision", "overall_recall", "overall_f1" (micro
    averages over entities) and "overall_accuracy" (fraction of tags right).
Example:
    >>> seqeval.compute(predictions=[["B-PER", "O", "B-LOC"]], references=[["B-PER", "O", "B-ORG"]])["overall_f1"]
    0.5
"""

SCHEMES = {name: getattr(seqeval_schemes, name) for name in ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")}


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Seqeval(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("string")),
                    "references": datasets.Sequence(datasets.Value("string")),
                }
            ),
            codebase_urls=["https://github.com/chakki-works/seqeval"],
            reference_urls=["https://www.clips.uantwerpen.be/conll2003/ner/"],
        )

    def _compute(
        self, predictions, references, suffix=False, scheme=None, mode=None, sample_weight=None, zero_division="warn"
    ):
        for i, (prediction, reference) in enumerate(zip(predictions, references)):
            if len(prediction) != len(reference):
                raise ValueError(f"sentence {i} has {len(prediction)} predicted tags but {len(reference)} gold tags")
        if scheme is not None:
            if scheme not in SCHEMES:
                raise ValueError(f"scheme={scheme!r} is not one of {sorted(SCHEMES)}")
            scheme = SCHEMES[scheme]
        if mode not in (None, "strict"):
            raise ValueError(f"mode={mode!r}; expected None or 'strict'")
        report = classification_report(
            y_true=references,
            y_pred=predictions,
            suffix=suffix,
            output_dict=True,
            scheme=scheme,
            mode=mode,
            sample_weight=sample_weight,
            zero_division=zero_division,
        )
        report.pop("macro avg")
        report.pop("weighted avg")
        overall = report.pop("micro avg")
        scores = {
            entity_type: {
                "precision": float(values["precision"]),
                "recall": float(values["recall"]),
                "f1": float(values["f1-score"]),
                "number": int(values["support"]),
            }
            for entity_type, values in report.items()
        }
        scores["overall_precision"] = float(overall["precision"])
        scores["overall_recall"] = float(overall["recall"])
        scores["overall_f1"] = float(overall["f1-score"])
        scores["overall_accuracy"] = float(accuracy_score(y_true=references, y_pred=predictions))
        return scores
