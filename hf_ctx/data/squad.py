"""SQuAD v1.1 and v2.0 for `examples/run_qa.py`: the official JSON files (or the Hub's `squad` / `squad_v2`),
checked where they are read; training windows with answer positions; evaluation windows; answers written as
the official evaluation scripts read them.

Each question becomes one row with the columns of the Hub's `squad` dataset: "id", "title", "context",
"question", "answers" ({"text": [...], "answer_start": [...]}, character offsets into the context; empty lists
for a SQuAD 2.0 question without an answer).
"""

import json
import logging
import re
from pathlib import Path

from datasets import Dataset, DatasetDict

from .atomic_write import write_text
from .files import read_json_file
from .qa_windows import answer_token_span, encode_windows

logger = logging.getLogger(__name__)

# The official layout, for error messages.
SQUAD_LAYOUT = (
    '{"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers": [{"text", '
    '"answer_start"}]}]}]}]}'
)
COLUMNS = ("id", "title", "context", "question", "answers")


def _layout_error(path, where: str, problem: str) -> ValueError:
    return ValueError(f"{path}: {where} {problem}; not in the SQuAD layout {SQUAD_LAYOUT}")


def _field(path, node, key: str, kind: type, where: str):
    if not isinstance(node, dict) or key not in node:
        raise _layout_error(path, where, f"has no {key!r}")
    if not isinstance(node[key], kind) or isinstance(node[key], bool):  # JSON's true is no number or id
        wanted = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise _layout_error(path, f"{where}.{key}", f"is a {type(node[key]).__name__}, not a {wanted}")
    return node[key]


def read_squad_file(path: str | Path, answers_required: bool = True) -> dict[str, list]:
    """The questions of a SQuAD JSON file (v1.1 or v2.0), one row per question (columns `COLUMNS`).

    A file not in the layout is a `ValueError` naming the file and where it departs from it; so is an answer
    whose `answer_start` does not point at its text (naming the question id). Without `answers_required`
    (questions to answer), a question may lack "answers".
    """
    path = Path(path)
    content = read_json_file(path, f"a SQuAD file, one JSON object {SQUAD_LAYOUT}", refuse_duplicate_keys=True)
    rows = {column: [] for column in COLUMNS}
    for a, article in enumerate(_field(path, content, "data", list, "the top level")):
        title = article.get("title", "") if isinstance(article, dict) else ""
        if title is not None and not isinstance(title, str):  # else pyarrow's "Expected bytes, got a 'int' object"
            raise _layout_error(path, f"data[{a}].title", f"is a {type(title).__name__}, not a str")
        for p, paragraph in enumerate(_field(path, article, "paragraphs", list, f"data[{a}]")):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(path, paragraph, "context", str, where)
            for q, qa in enumerate(_field(path, paragraph, "qas", list, where)):
                qa_where = f"{where}.qas[{q}]"
                qid = str(_field(path, qa, "id", (str, int), qa_where))
                qa_where = f"question {qid!r} ({qa_where})"
                question = _field(path, qa, "question", str, qa_where)
                impossible = qa.get("is_impossible", False)
                if not isinstance(impossible, bool):  # "false" would be true
                    raise _layout_error(
                        path, f"{qa_where}.is_impossible", f"is {json.dumps(impossible)}, not true or false"
                    )
                if impossible and qa.get("answers"):  # the official scripts score the answers, not the flag
                    raise ValueError(
                        f"{path}: {qa_where} has is_impossible true but {len(qa['answers'])} answer(s) "
                        f'({json.dumps(qa["answers"])[:80]}); an unanswerable question has "answers": [] (SQuAD 2.0 '
                        'puts its near-answers under "plausible_answers"), an answerable one is_impossible false'
                    )
                if impossible or (not answers_required and "answers" not in qa):
                    answers = []
                else:
                    answers = _field(path, qa, "answers", list, qa_where)
                texts, starts = [], []
                for answer in answers:
                    texts.append(_field(path, answer, "text", str, f"{qa_where}.answers"))
                    starts.append(_field(path, answer, "answer_start", int, f"{qa_where}.answers"))
                rows["id"].append(qid)
                rows["title"].append(title)
                rows["context"].append(context)
                rows["question"].append(question)
                rows["answers"].append({"text": texts, "answer_start": starts})
    check_questions(rows, path)
    return rows


def check_questions(rows: dict[str, list] | Dataset, source, version_2_with_negative: bool | None = None) -> None:
    """Refuse what cannot be trained on or scored, naming `source` and the question id: a question id seen
    twice, a question or context that is empty (or blanks only: the model would answer nothing, or from nothing),
    an answer whose text is empty or whose `answer_start` does not point at its text, and (when
    `version_2_with_negative` is False) a question without an answer; and no questions at all."""
    if len(rows["id"]) == 0:  # else a training run fails on a missing column, an evaluation after training
        raise ValueError(f"{source} holds no questions (a SQuAD file is one JSON object {SQUAD_LAYOUT})")
    seen = set()
    for qid, question, context, answers in zip(rows["id"], rows["question"], rows["context"], rows["answers"]):
        if qid in seen:
            raise ValueError(f"{source}: question id {qid!r} appears twice; predictions are keyed by id")
        seen.add(qid)
        for name, text in (("question", question), ("context", context)):
            if not text.strip():  # a window of [CLS] [SEP] and the context alone, or no span to answer from
                raise ValueError(f"{source}: question {qid!r}: the {name} is {text!r}; give it a text")
        for text, start in zip(answers["text"], answers["answer_start"]):
            if not text.strip():  # no span of tokens: an unanswerable question has no answers instead
                raise ValueError(
                    f"{source}: question {qid!r}: the answer text is {text!r}, which no span of the context can be; "
                    'a question without an answer has none ("answers": []), with --version_2_with_negative'
                )
            found = context[start : start + len(text)] if start >= 0 else None
            if found != text:
                raise ValueError(
                    f"{source}: question {qid!r}: answer_start {start} points at {found!r}, not at the answer {text!r}"
                )
        if version_2_with_negative is False and not answers["text"]:
            raise ValueError(
                f"{source}: question {qid!r} has no answer; SQuAD 2.0 data (unanswerable questions) needs "
                "--version_2_with_negative"
            )


def check_scorable_test_questions(dataset, source) -> None:
    """Questions to answer are scored by SQuAD 1.1's rules where they have answers: every one of them, or none
    (then they are only answered). A file with both is refused before any training, naming a question of each."""
    answered = [bool(answers["text"]) for answers in dataset["answers"]]
    if any(answered) and not all(answered):
        without, with_answer = dataset["id"][answered.index(False)], dataset["id"][answered.index(True)]
        raise ValueError(
            f"{source}: question {without!r} has no answer, but {sum(answered)} others (e.g. {with_answer!r}) have "
            "one; SQuAD 1.1 scores only questions that all have answers. Give --version_2_with_negative (a question "
            "may have no answer, SQuAD 2.0), or a test file whose questions all have answers, or none (answered "
            "only)"
        )


def load_squad(
    files: dict[str, str | None],
    dataset_name: str | None = None,
    dataset_config_name: str | None = None,
    version_2_with_negative: bool = False,
    cache_dir: str | None = None,
) -> DatasetDict:
    """The splits of `files` (split -> SQuAD JSON file) or, without files, of the Hub dataset `dataset_name`
    ("squad", "squad_v2"), checked (`check_questions`); neither gives an empty `DatasetDict`. The "test" split
    holds questions to answer: they need no answers."""
    files = {split: path for split, path in files.items() if path}
    if files:
        splits = {
            split: Dataset.from_dict(read_squad_file(path, answers_required=split != "test"))
            for split, path in files.items()
        }
        sources = files
    elif dataset_name is not None:
        from datasets import load_dataset

        splits = dict(load_dataset(dataset_name, dataset_config_name, cache_dir=cache_dir))
        sources = {split: f"{dataset_name} ({split})" for split in splits}
        for split, dataset in splits.items():
            missing = [c for c in ("id", "context", "question", "answers") if c not in dataset.column_names]
            if missing:
                raise ValueError(f"{sources[split]} lacks the column(s) {missing}; it has {dataset.column_names}")
    else:
        return DatasetDict()  # nothing asked for; the caller names what is missing
    for split, dataset in splits.items():
        check_questions(dataset, sources[split], None if split == "test" else version_2_with_negative)
        if split == "test" and not version_2_with_negative:
            check_scorable_test_questions(dataset, sources[split])
        unanswerable = sum(not answers["text"] for answers in dataset["answers"])
        logger.info(
            "%s: %d questions (%d without an answer) on %d contexts",
            sources[split],
            len(dataset),
            unanswerable,
            len(set(dataset["context"])),
        )
    return DatasetDict(splits)


# --- windows -------------------------------------------------------------------------------------------------


def encode_for_training(batch, tokenizer, max_seq_length: int, doc_stride: int, source: str):
    """Training windows (`encode_windows`) with "start_positions" / "end_positions": the first answer's tokens
    when the window holds it whole, else the [CLS] token (index 0: "no answer in this window", and the answer
    to a SQuAD 2.0 question without one). "example_id" and "answer_in_window" say which question each window
    comes from and whether it holds the answer (`drop_unanswerable_windows` uses them)."""
    encoded = encode_windows(
        tokenizer, batch["question"], batch["context"], max_seq_length, doc_stride, batch["id"], source
    )
    starts, ends, inside = [], [], []
    for offsets, example_index in zip(encoded["offset_mapping"], encoded["example_index"]):
        answers = batch["answers"][example_index]
        span = None
        if answers["text"]:
            first = answers["answer_start"][0]
            span = answer_token_span(offsets, first, first + len(answers["text"][0]))
        starts.append(span[0] if span else 0)
        ends.append(span[1] if span else 0)
        inside.append(span is not None or not answers["text"])
    encoded["start_positions"], encoded["end_positions"] = starts, ends
    encoded["answer_in_window"] = inside
    encoded["example_id"] = [batch["id"][i] for i in encoded["example_index"]]
    del encoded["offset_mapping"], encoded["example_index"]
    return encoded


def drop_unanswerable_windows(windows: Dataset, num_questions: int, source: str) -> Dataset:
    """Drop the windows of questions whose answer no window holds whole (an answer cut by every window
    boundary): training them on [CLS] would teach "no answer" for a question that has one. Says how many
    questions go, and how many windows of the others are trained as "no answer in this window"."""
    answered = {qid for qid, inside in zip(windows["example_id"], windows["answer_in_window"]) if inside}
    cut = len(set(windows["example_id"]) - answered)
    if cut:
        logger.warning(
            "%s: %d of %d questions dropped from training: no window of --max_seq_length tokens (overlapping by "
            "--doc_stride) holds their whole answer",
            source,
            cut,
            num_questions,
        )
        windows = windows.filter(lambda qid: qid in answered, input_columns="example_id", desc="dropping cut answers")
    outside = sum(not inside for inside in windows["answer_in_window"])
    logger.info(
        "%s: %d training windows; %d of them lie outside their answer and are trained to point at [CLS]",
        source,
        len(windows),
        outside,
    )
    return windows.remove_columns(["answer_in_window", "example_id"])


def encode_for_evaluation(batch, tokenizer, max_seq_length: int, doc_stride: int, source: str):
    """Evaluation windows (`encode_windows`) with "example_id" (the question's id) and "offset_mapping"."""
    encoded = encode_windows(
        tokenizer, batch["question"], batch["context"], max_seq_length, doc_stride, batch["id"], source
    )
    encoded["example_id"] = [batch["id"][i] for i in encoded.pop("example_index")]
    return encoded


# --- answers -------------------------------------------------------------------------------------------------


def write_json(path: str | Path, content) -> Path:
    """Write `content` as JSON to `path` atomically (`hf_ctx.data.atomic_write.write_text`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(content, indent=2, ensure_ascii=False) + "\n")
    return path


def metric_inputs(predictions: dict[str, str], examples, version_2_with_negative: bool) -> dict[str, list]:
    """`predictions` ({id: text}) and the questions' answers as `load_metric("squad" / "squad_v2")` takes them."""
    formatted = [{"id": qid, "prediction_text": text} for qid, text in predictions.items()]
    if version_2_with_negative:
        for row in formatted:
            row["no_answer_probability"] = 0.0  # the null-score threshold has already decided
    references = [{"id": qid, "answers": answers} for qid, answers in zip(examples["id"], examples["answers"])]
    return {"predictions": formatted, "references": references}


# --- a baseline ----------------------------------------------------------------------------------------------


def first_sentence(context: str) -> str:
    """The context's first sentence (up to the first ".", "!" or "?" followed by a space): a trivial reader."""
    match = re.search(r"[.!?](\s|$)", context)
    return context[: match.start() + 1] if match else context
