"""Extractive question answering's input side: a question and its context into overlapping windows of tokens, and
an answer's characters into a window's token span. `data/squad.py` (training and evaluation) and
`tools/question_answering.py` (the pipeline) share these steps.
"""

# The window's positions of one feature outside the context (question, special tokens, padding) have no offsets.
NO_OFFSET = None


def question_lengths(tokenizer, questions: list[str]) -> list[int]:
    return [len(ids) for ids in tokenizer(questions, add_special_tokens=False)["input_ids"]]


def check_window_room(tokenizer, questions: list[str], ids: list[str], max_seq_length: int, doc_stride: int, source):
    """Refuse a question that leaves its context windows no more room than `doc_stride` tokens (the windows
    could not advance), naming `source` (a file) and the question id."""
    special = tokenizer.num_special_tokens_to_add(pair=True)
    for qid, length in zip(ids, question_lengths(tokenizer, questions)):
        room = max_seq_length - special - length
        if room <= doc_stride:
            left = f"{room} of --max_seq_length {max_seq_length} tokens" if room > 0 else "no room"
            raise ValueError(
                f"{source}: question {qid!r} is {length} tokens long ({special} special tokens beside it), which "
                f"leaves its context windows {left}, not more than --doc_stride {doc_stride}; raise "
                f"--max_seq_length (now {max_seq_length}), lower --doc_stride or shorten the question"
            )


def encode_windows(
    tokenizer,
    questions: list[str],
    contexts: list[str],
    max_seq_length: int,
    doc_stride: int,
    ids=None,
    source="input",
):
    """Tokenize (question, context) pairs as `[CLS] question [SEP] context window [SEP]`: a context longer than
    the room left by the question is cut into windows of `max_seq_length` tokens that overlap by `doc_stride`
    tokens, as BERT's and transformers' SQuAD code do.

    Returns the tokenizer's encoding, one row per window, with "example_index" (the pair it comes from) and
    "offset_mapping" ((start, end) character offsets into the context for context tokens, None elsewhere).
    A question too long to leave room for windows is a `ValueError` naming `source` and its id (`ids`, default
    its index).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"question answering needs a fast tokenizer (offsets); got {type(tokenizer).__name__}")
    if tokenizer.padding_side != "right":
        raise ValueError("question answering puts the question first and pads on the right; the tokenizer pads left")
    questions = [question.lstrip() for question in questions]  # leading spaces only waste window room
    ids = list(range(len(questions))) if ids is None else ids
    check_window_room(tokenizer, questions, ids, max_seq_length, doc_stride, source)
    encoded = tokenizer(
        questions,
        contexts,
        truncation="only_second",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    encoded["example_index"] = encoded.pop("overflow_to_sample_mapping")
    encoded["offset_mapping"] = [
        [offset if sequence_id == 1 else NO_OFFSET for offset, sequence_id in zip(offsets, encoded.sequence_ids(i))]
        for i, offsets in enumerate(encoded["offset_mapping"])
    ]
    return encoded


def answer_token_span(offsets: list, start_char: int, end_char: int) -> tuple[int, int] | None:
    """The first and last token of a window whose context tokens cover the characters [start_char, end_char),
    or None when the answer is not wholly inside the window."""
    context = [i for i, offset in enumerate(offsets) if offset is not NO_OFFSET]
    if not context or offsets[context[0]][0] > start_char or offsets[context[-1]][1] < end_char:
        return None
    start = next(i for i in context if offsets[i][1] > start_char)
    end = next(i for i in reversed(context) if offsets[i][0] < end_char)
    return start, end
