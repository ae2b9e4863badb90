"""Extractive question answering's output side: start/end scores of a question's context windows back into answer
texts (`data/qa_windows.py` makes the windows). `examples/run_qa.py` and `QuestionAnsweringPipeline` share these
steps.

transformers 5 removed its question-answering pipeline; `QuestionAnsweringPipeline` answers in one call from a
trained checkpoint (an hf_ctx `CtxBertForQuestionAnswering`, or any `AutoModelForQuestionAnswering` with a fast
tokenizer), with the output format of transformers 4's pipeline:

    >>> from hf_ctx import QuestionAnsweringPipeline
    >>> reader = QuestionAnsweringPipeline.from_pretrained("runs/squad")
    >>> reader(question="Who won Super Bowl 50?", context="The Denver Broncos defeated the Carolina Panthers ...")
    {'score': 0.83, 'start': 4, 'end': 18, 'answer': 'Denver Broncos'}
"""

import collections
import logging

import numpy as np
import torch

from ..data.files import LONE_SURROGATE
from ..data.qa_windows import NO_OFFSET, encode_windows
from . import option_kinds as kinds
from .families import check_tokenizer_fits

logger = logging.getLogger(__name__)


def best_answers(
    context: str,
    windows: list[tuple[np.ndarray, np.ndarray, list]],
    n_best_size: int = 20,
    max_answer_length: int = 30,
    with_null: bool = False,
) -> list[dict]:
    """The `n_best_size` best answers to one question, best first, from its windows' (start_logits, end_logits,
    offset_mapping): each {"text", "start", "end" (character offsets into `context`), "score" (start + end
    logit), "start_logit", "end_logit", "probability" (softmax over the listed scores)}.

    Candidates are the `n_best_size` best starts by the `n_best_size` best ends of each window, spans inside
    the context, ending after they start and at most `max_answer_length` tokens long (transformers'
    `postprocess_qa_predictions`). With `with_null` (SQuAD 2.0) the null answer {"text": ""} competes with the
    score of the first token ([CLS]), its lowest over the windows, and is always listed. Without any valid span
    (v1.1) the answer is the empty text with score -inf.
    """
    candidates, null = [], None
    for start_logits, end_logits, offsets in windows:
        length = len(offsets)  # logits past it are padding
        start_logits, end_logits = np.asarray(start_logits)[:length], np.asarray(end_logits)[:length]
        null_score = float(start_logits[0] + end_logits[0])
        if null is None or null_score < null["score"]:
            null = {"text": "", "start": 0, "end": 0, "score": null_score}
            null.update(start_logit=float(start_logits[0]), end_logit=float(end_logits[0]))
        best_starts = np.argsort(start_logits)[::-1][:n_best_size]
        best_ends = np.argsort(end_logits)[::-1][:n_best_size]
        for start in best_starts:
            for end in best_ends:
                if offsets[start] is NO_OFFSET or offsets[end] is NO_OFFSET:
                    continue
                if end < start or end - start + 1 > max_answer_length:
                    continue
                first, last = offsets[start][0], offsets[end][1]
                candidates.append(
                    {
                        "text": context[first:last],
                        "start": int(first),
                        "end": int(last),
                        "score": float(start_logits[start] + end_logits[end]),
                        "start_logit": float(start_logits[start]),
                        "end_logit": float(end_logits[end]),
                    }
                )
    if with_null and null is not None:
        candidates.append(null)
    candidates = sorted(candidates, key=lambda c: c["score"], reverse=True)[:n_best_size]
    if with_null and null is not None and null not in candidates:
        candidates.append(null)
    if not candidates:
        candidates = [
            {"text": "", "start": 0, "end": 0, "score": -np.inf, "start_logit": -np.inf, "end_logit": -np.inf}
        ]
    scores = np.array([c["score"] for c in candidates])
    probabilities = np.exp(scores - scores.max()) if np.isfinite(scores.max()) else np.ones_like(scores)
    for candidate, probability in zip(candidates, probabilities / probabilities.sum()):
        candidate["probability"] = float(probability)
    return candidates


def choose_answer(n_best: list[dict], with_null: bool, null_score_diff_threshold: float = 0.0) -> tuple[str, float]:
    """(answer text, null score minus the best span's score) from `best_answers`' list: the best span, or for
    SQuAD 2.0 "" when the null answer beats the best span by more than `null_score_diff_threshold`."""
    spans = [c for c in n_best if c["text"]]
    if not with_null:
        return n_best[0]["text"], 0.0
    null = next(c for c in n_best if not c["text"])
    if not spans:
        return "", float("inf")
    difference = null["score"] - spans[0]["score"]
    return ("" if difference > null_score_diff_threshold else spans[0]["text"]), difference


def postprocess_predictions(
    examples: list[tuple[str, str]],
    features: list[tuple[int, list]],
    start_logits,
    end_logits,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
):
    """Answers to every question from its windows' logits.

    Args:
        examples: (question id, context) per question.
        features: (index into `examples`, offset_mapping) per window, in the order of the logits.
        start_logits, end_logits: (windows, tokens) arrays; rows padded past each window's length.

    Returns:
        (predictions {id: text}, n-best lists {id: [...]} as `best_answers` gives them, null-score differences
        {id: float} (SQuAD 2.0; empty otherwise)).
    """
    if len(features) != len(start_logits) or len(features) != len(end_logits):
        raise ValueError(f"{len(features)} windows but {len(start_logits)} / {len(end_logits)} rows of logits")
    windows = collections.defaultdict(list)
    for (example_index, offsets), starts, ends in zip(features, start_logits, end_logits):
        windows[example_index].append((starts, ends, offsets))
    predictions, n_best, null_differences = {}, {}, {}
    for index, (qid, context) in enumerate(examples):
        if not windows[index]:
            raise ValueError(f"question {qid!r} has no window to answer from")
        n_best[qid] = best_answers(context, windows[index], n_best_size, max_answer_length, version_2_with_negative)
        predictions[qid], difference = choose_answer(n_best[qid], version_2_with_negative, null_score_diff_threshold)
        if version_2_with_negative:
            null_differences[qid] = difference
    spanless = sum(not np.isfinite(n_best[qid][0]["score"]) for qid, _ in examples)
    if spanless:
        logger.warning(
            "%d of %d questions got no valid span (none of the n best starts and ends pair up inside the context "
            "within max_answer_length) and are answered with the empty text",
            spanless,
            len(examples),
        )
    return predictions, n_best, null_differences


def texts(name: str, value) -> list:
    """`value` (a text or a list of texts) as a non-empty list; a `TypeError`/`ValueError` naming `name` else."""
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a text or a list of texts, got {type(value).__name__} {value!r:.40}")
    if not value:
        raise ValueError(f"{name} is an empty list: give at least one text")
    return list(value)


class QuestionAnsweringPipeline:
    """Answers from a question-answering model in one call: `reader(question=..., context=...)`.

    The context is read in windows (`max_seq_length` tokens, at most the model's `max_position_embeddings`,
    overlapping by `doc_stride`) and the best span over them is returned as
    {"score" (its probability among the n best), "start", "end" (character offsets), "answer"}; `top_k` > 1
    gives a list of the `top_k` best. `handle_impossible_answer=True` (SQuAD 2.0 models) lets the empty answer
    win when the model scores it higher. Lists of questions and contexts give a list of results.

    The call takes what transformers 4's pipeline took: `question=` and `context=` (texts or lists of texts),
    the two texts as positional arguments, a dict {"question": ..., "context": ...} or a list of them; and, for
    one call, `max_answer_len`, `max_seq_len` and `doc_stride` over the values the pipeline was built with.
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_seq_length: int = 384,
        doc_stride: int | None = None,
        max_answer_length: int = 30,
        n_best_size: int = 20,
        batch_size: int = 8,
    ):
        kinds.COUNT.check("n_best_size", n_best_size)
        kinds.COUNT.check("batch_size", batch_size)
        # The tokenizer against the model, as every hf_ctx pipeline (`TokenizerFitsModelMixin`)
        check_tokenizer_fits(
            model.config, tokenizer, None, getattr(tokenizer, "name_or_path", None) or "the tokenizer"
        )
        self.model, self.tokenizer = model.eval(), tokenizer
        # transformers' default overlap, 128 of 384 tokens, kept to a third of a shorter model's window.
        self.max_seq_length, self.doc_stride, self.max_answer_length = self._sizes(
            ("max_seq_length", max_seq_length),
            ("doc_stride", doc_stride),
            ("max_answer_length", max_answer_length),
            128,
        )
        self.n_best_size, self.batch_size = n_best_size, batch_size

    def _sizes(self, max_seq_length: tuple, doc_stride: tuple, max_answer_length: tuple, default_stride: int):
        """The window, its overlap and the longest answer, each a (name, value) as the caller was given it, checked
        and fitted to the model: the window at most its `max_position_embeddings`, an overlap not given
        `default_stride` up to a third of the window."""
        for name, value in (max_seq_length, max_answer_length):
            kinds.COUNT.check(name, value)
        if doc_stride[1] is not None:
            kinds.count_or_zero("windows that do not overlap").check(*doc_stride)
        window = min(max_seq_length[1], getattr(self.model.config, "max_position_embeddings", max_seq_length[1]))
        stride = min(default_stride, window // 3) if doc_stride[1] is None else doc_stride[1]
        return window, stride, max_answer_length[1]

    @classmethod
    def from_pretrained(cls, name_or_path, **kwargs):
        """The model (`AutoModelForQuestionAnswering`) and tokenizer of a checkpoint folder or Hub id; a missing
        local path or a folder that is not a model's is refused in one line (`check_model_folder`)."""
        from transformers import AutoModelForQuestionAnswering

        from .loading import load_tokenizer
        from .paths import check_model_folder

        check_model_folder(name_or_path, "model")
        return cls(AutoModelForQuestionAnswering.from_pretrained(name_or_path), load_tokenizer(name_or_path), **kwargs)

    @torch.no_grad()
    def _logits(self, encoded):
        names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in encoded]
        rows = [{n: encoded[n][i] for n in names} for i in range(len(encoded["input_ids"]))]
        device = next(self.model.parameters()).device
        starts, ends = [], []
        for first in range(0, len(rows), self.batch_size):
            batch = self.tokenizer.pad(rows[first : first + self.batch_size], return_tensors="pt").to(device)
            output = self.model(**batch)
            starts += list(output.start_logits.float().cpu().numpy())
            ends += list(output.end_logits.float().cpu().numpy())
        return starts, ends

    def __call__(
        self,
        *inputs,
        question=None,
        context=None,
        top_k: int = 1,
        handle_impossible_answer: bool = False,
        max_answer_len: int | None = None,
        max_seq_len: int | None = None,
        doc_stride: int | None = None,
    ):
        kinds.COUNT.check("top_k", top_k)
        kinds.check_flag("handle_impossible_answer", handle_impossible_answer)
        # This call's sizes over the pipeline's; the pipeline's overlap kept to a third of this call's window.
        max_seq_length, stride, max_answer_length = self._sizes(
            ("max_seq_len", self.max_seq_length if max_seq_len is None else max_seq_len),
            ("doc_stride", self.doc_stride if doc_stride is None and max_seq_len is None else doc_stride),
            ("max_answer_len", self.max_answer_length if max_answer_len is None else max_answer_len),
            self.doc_stride,
        )
        question, context, single = _questions_and_contexts(inputs, question, context)
        questions = [question] if single else texts("question", question)
        contexts = [context] * len(questions) if isinstance(context, str) else texts("context", context)
        if len(contexts) != len(questions):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
        for name, values in [("question", questions), ("context", contexts)]:
            empty = [i for i, text in enumerate(values) if not isinstance(text, str) or not text.strip()]
            if empty:
                raise ValueError(f"{name} {empty[0]} is empty or not a text: {values[empty[0]]!r:.40}")
            damaged = [i for i, text in enumerate(values) if LONE_SURROGATE.search(text)]
            if damaged:  # the tokenizer would fail with "TextInputSequence must be str"
                raise ValueError(
                    f"{name} {damaged[0]} holds half of a UTF-16 surrogate pair (e.g. '\\ud800' without its other "
                    f"half), which is no character and no tokenizer can encode: {values[damaged[0]]!r:.40}"
                )
        encoded = encode_windows(self.tokenizer, questions, contexts, max_seq_length, stride)
        starts, ends = self._logits(encoded)
        _, n_best, _ = postprocess_predictions(
            list(enumerate(contexts)),
            list(zip(encoded["example_index"], encoded["offset_mapping"])),
            starts,
            ends,
            n_best_size=max(self.n_best_size, top_k),
            max_answer_length=max_answer_length,
            version_2_with_negative=handle_impossible_answer,
        )
        results = []
        for index in range(len(questions)):
            best = [
                {"score": c["probability"], "start": c["start"], "end": c["end"], "answer": c["text"]}
                for c in n_best[index]
            ]
            if handle_impossible_answer:
                best.sort(key=lambda c: c["score"], reverse=True)  # the null answer was appended after the n best
            results.append(best[0] if top_k == 1 else best[:top_k])
        return results[0] if single else results


def _questions_and_contexts(inputs: tuple, question, context) -> tuple:
    """(question, context, single) from the forms a call takes: `question=` and `context=` (`inputs` empty),
    `(question, context)` as two positional texts, one {"question", "context"} dict or a list of them."""
    if not inputs:  # the texts are checked by the caller
        return question, context, isinstance(question, str)
    if question is not None or context is not None:
        raise TypeError("give the question and context once: as question= and context=, or as the positional input")
    if len(inputs) == 2 and all(isinstance(text, str) for text in inputs):
        return inputs[0], inputs[1], True
    if len(inputs) > 1:
        raise TypeError(f"give one input (a dict or a list of dicts) or a question and a context, got {len(inputs)}")
    given = inputs[0]
    single = isinstance(given, dict)
    items = [given] if single else given
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(item, dict) for item in items):
        raise TypeError(
            "the input must be a {'question': ..., 'context': ...} dict or a list of them, got "
            f"{type(given).__name__} {given!r:.40}"
        )
    for i, item in enumerate(items):
        missing = [key for key in ("question", "context") if key not in item]
        if missing:
            raise ValueError(f"input {i} has no {missing[0]!r}: each dict needs 'question' and 'context'")
    questions, contexts = [item["question"] for item in items], [item["context"] for item in items]
    return (questions[0], contexts[0], True) if single else (questions, contexts, False)
