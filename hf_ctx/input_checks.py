"""The checks of the tensors that enter a model: BERT's token ids, ELMo's and TagLM's character and word ids, cached
biLM states, labels, and a CRF tagger's gold tags. Every family and the CRF import them from here (single-dot
relative imports, so this file travels with a checkpoint's remote code); a config's fields are checked by the config
(`configuration_checks.py`).

Each model checks its inputs once, where they enter, and then runs its parts (the biLM inside TagLM, the CRF)
through their unchecked methods. Bad input is a `ValueError` naming the tensor, its shape or the value, before a
kernel runs: an out-of-range id would otherwise be an opaque index error on CPU or a device-side assert on CUDA.
A check that needs tensor values reads all of them back to the host at once (`values_outside`: one host sync),
and is skipped where `host_syncs_allowed` says no (while `torch.compile` traces, on XLA).

Shapes use B = batch, T = tokens, W = words, C = characters per word, S = a CRF's positions.
"""

from collections.abc import Sequence

import torch

# Label of a position that gets no loss and no metric (padding, special tokens, a word's later sub-tokens).
# PyTorch's cross-entropy, transformers' data collators and `Trainer` use the same value.
IGNORE_INDEX = -100


def host_syncs_allowed(tensor: torch.Tensor) -> bool:
    """Whether a forward pass may read values of `tensor` back to the host (the input checks that cost one host
    sync, BERT's unpadding). Not while `torch.compile` traces (data-dependent control flow breaks the graph), and
    not on an XLA device (TPU): there each read runs the lazily built graph and waits for it, every step, and a
    data-dependent shape compiles a new graph."""
    return not torch.compiler.is_compiling() and tensor.device.type != "xla"


def true_positions(mask: torch.Tensor) -> torch.Tensor:
    """(K,) int64: the flat positions of the K true values of boolean `mask`, in order (`torch.nonzero` of the
    flattened mask). K depends on the values, so under `torch.compile` this runs as the custom op
    `hf_ctx::true_positions`, which the compiler traces with a symbolic K inside the graph, without torch's
    `capture_dynamic_output_shape_ops` (which `torch.nonzero` needs unless `fullgraph=True`): a plain
    `torch.compile(model)` keeps BERT's unpadding and sparse MLM prediction."""
    if torch.compiler.is_compiling():
        return torch.ops.hf_ctx.true_positions(mask)
    return torch.nonzero(mask.flatten()).flatten()


def _true_positions_op(mask: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(mask.flatten()).flatten()


def _true_positions_fake(mask: torch.Tensor) -> torch.Tensor:
    """The op's output while tracing: K a new symbolic size in [0, mask.numel()]."""
    context = torch.library.get_ctx()
    shape_env = getattr(context, "_shape_env", None)
    if shape_env is None:  # tracing without symbolic sizes: torch's own error (a graph break under torch.compile)
        count = context.new_dynamic_size()
    else:
        # `new_dynamic_size` refuses unless `capture_dynamic_output_shape_ops` (or fullgraph) is set; the size is
        # made as it makes it (and as torch's own device-mesh op does), so that no flag is needed.
        from torch.fx.experimental.symbolic_shapes import _constrain_range_for_size

        count = shape_env.create_unbacked_symint()
        _constrain_range_for_size(count, min=0, max=mask.numel() if isinstance(mask.numel(), int) else None)
    return mask.new_empty(count, dtype=torch.long)


# Once per process: remote code imports a second copy of this file under another module name.
if not hasattr(torch.ops.hf_ctx, "true_positions"):
    torch.library.custom_op("hf_ctx::true_positions", _true_positions_op, mutates_args=()).register_fake(
        _true_positions_fake
    )


def values_outside(
    ranges: Sequence[tuple[torch.Tensor, int]], flags: Sequence[torch.Tensor] = ()
) -> tuple[list[int | None], list[int]]:
    """Every value check of one input in one host sync.

    Args:
        ranges: (tensor, limit) pairs: integer tensors whose values belong in [0, limit).
        flags: 0-d tensors (a count, a boolean) the check also needs on the host.

    Returns:
        For each pair, the first of its tensor's minimum (if negative) and maximum (if limit or more) that lies
        outside [0, limit), or None when every value is inside (an empty tensor is); and each flag as an int.
    """
    bounds = [bound for tensor, _ in ranges if tensor.numel() > 0 for bound in (tensor.min(), tensor.max())]
    values = iter(torch.stack([value.long() for value in bounds + list(flags)]).tolist() if bounds or flags else [])
    outside = []
    for tensor, limit in ranges:
        low, high = (next(values), next(values)) if tensor.numel() > 0 else (0, limit - 1)  # empty: nothing outside
        outside.append(low if low < 0 else high if high >= limit else None)
    return outside, list(values)


# --- labels -----------------------------------------------------------------------------------------------------


def check_label_range(labels: torch.Tensor, num_classes: int) -> None:
    """A `ValueError` unless every label is a class id in [0, num_classes) or `IGNORE_INDEX` (the classification
    losses' labels)."""
    if not host_syncs_allowed(labels):
        return
    used = labels.masked_fill(labels == IGNORE_INDEX, 0)  # 0 is a class id: ignored labels pass
    (outside,), _ = values_outside([(used, num_classes)])
    if outside is not None:
        raise label_range_error(outside, num_classes)


def check_integer_labels(labels, name: str = "labels") -> None:
    """A `ValueError` unless `labels` are a tensor of integer class ids (any integer dtype; the losses read them as
    int64): float or boolean labels would fail inside `cross_entropy` or a CRF's gather without naming the
    argument (`name`)."""
    if not isinstance(labels, torch.Tensor) or labels.dtype.is_floating_point or labels.dtype.is_complex:
        what = f"dtype {labels.dtype}" if isinstance(labels, torch.Tensor) else type(labels).__name__
    elif labels.dtype == torch.bool:
        what = "dtype torch.bool"
    else:
        return
    raise ValueError(f"{name} must be a tensor of integer class ids (int64), or {IGNORE_INDEX} for none; got {what}")


def label_range_error(label: int, num_classes: int) -> ValueError:
    """The error of a label outside [0, num_classes) (`check_label_range`'s and `check_gold_tags`')."""
    return ValueError(
        f"label {label} is outside [0, num_labels={num_classes}); a label is a class id, or {IGNORE_INDEX} for no loss"
    )


def check_target_values(labels: torch.Tensor, problem_type: str) -> None:
    """A `ValueError` unless a sequence classifier's float targets are finite (`problem_type` "regression") or lie
    in [0, 1] ("multi_label_classification"): a NaN target makes the loss NaN, and binary cross-entropy takes a
    target of 2 or -1 without complaint and learns nonsense from it. One host sync."""
    if not host_syncs_allowed(labels) or labels.numel() == 0:
        return
    values = labels.float()
    # Regression: finite. Multi-label: in [0, 1], which NaN is not.
    inside = torch.isfinite(values) if problem_type == "regression" else (values >= 0) & (values <= 1)
    bad = ~inside.all()
    _, (bad,) = values_outside([], [bad])
    if bad and problem_type == "regression":
        raise ValueError("regression labels hold NaN or infinite values: the loss would be NaN")
    if bad:
        raise ValueError(
            "multi-label classification labels must lie in [0, 1] (1: the label applies, 0: it does not); "
            "found a value outside it or NaN"
        )


def check_span_positions(positions: torch.Tensor, name: str) -> None:
    """A `ValueError` unless extractive QA's span positions (`name`: start_positions or end_positions) are integer
    token indices, or `IGNORE_INDEX` for no loss: a negative position is no token (transformers clamps it to 0, the
    [CLS] token, and trains it as a no-answer span in silence). A position past the input is a span cut off by
    truncation, ignored as in transformers. One host sync."""
    check_integer_labels(positions, name)
    if not host_syncs_allowed(positions) or positions.numel() == 0:
        return
    used = positions.masked_fill(positions == IGNORE_INDEX, 0)
    (outside,), _ = values_outside([(used, torch.iinfo(torch.int64).max)])
    if outside is not None:
        raise ValueError(
            f"{name} contains {outside}: a span position is a token index (past the input: ignored), or "
            f"{IGNORE_INDEX} for no loss"
        )


def check_labels_shape(labels: torch.Tensor, mask: torch.Tensor) -> None:
    """A `ValueError` unless a word tagger's `labels` are integer class ids (`check_integer_labels`: a list is
    named, not an attribute error) of the shape of its word mask (B, W)."""
    check_integer_labels(labels)
    if tuple(labels.shape) != tuple(mask.shape):
        raise ValueError(f"labels has shape {tuple(labels.shape)}, expected (batch, words) = {tuple(mask.shape)}")


def check_gold_tags(crf, labels: torch.Tensor, mask: torch.Tensor, config) -> None:
    """A `ValueError` unless `labels` (B, S) give every word of the prefix mask `mask` (B, S) a tag id in
    [0, num_labels) and the tags follow `config.tag_scheme` under the CRF `crf`'s allowed transitions: the
    transition error names the sentence, word and transition (O -> I-PER under IOB2). The CRF scores such a
    transition -10000, so training on it gives a loss of about 10,000 and learns nothing; the data is then in
    another scheme (IOB1), to be converted first.

    The three checks (negative, range, transitions) cost one host sync together.
    """
    check_integer_labels(labels)
    if not host_syncs_allowed(labels) or labels.numel() == 0:
        return
    allowed, t = crf.allowed, crf.num_tags
    tags = labels.masked_fill(~mask, 0)
    in_range = tags.clamp(0, t - 1)  # the transitions are read only when every tag is in range
    lengths = mask.sum(1)
    has_words = lengths > 0
    # (B, S + 1) flags: start -> first tag, tag -> next tag, last tag -> end
    bad_start = has_words & ~allowed[t, in_range[:, 0]]
    bad_inside = mask[:, 1:] & ~allowed[in_range[:, :-1], in_range[:, 1:]]
    last = in_range.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    bad_end = has_words & ~allowed[last, t + 1]
    bad = torch.cat([bad_start.unsqueeze(1), bad_inside, bad_end.unsqueeze(1)], dim=1)
    (outside,), (any_bad,) = values_outside([(tags, t)], [bad.any()])
    if outside is not None and outside < 0:
        raise ValueError(
            f"labels must give every word a tag id; found a negative label (e.g. {IGNORE_INDEX}) on a word"
        )
    if outside is not None:
        raise label_range_error(outside, t)
    if any_bad:
        raise tag_scheme_error(bad, in_range, lengths, config)


def tag_scheme_error(bad: torch.Tensor, tags: torch.Tensor, lengths: torch.Tensor, config) -> ValueError:
    """The error of the first transition `bad` (B, S + 1) flags in `tags` (B, S), which `config.tag_scheme`
    forbids: sentence, word and transition named, with the conversion that fixes it."""
    sentence, position = (int(i) for i in bad.nonzero()[0])
    names = {int(k): v for k, v in config.id2label.items()}
    row = tags[sentence].tolist()
    if position == 0:
        where, transition = "at its first word", f"the sentence start -> {names[row[0]]}"
    elif position == int(lengths[sentence]):
        where, transition = "at its last word", f"{names[row[position - 1]]} -> the sentence end"
    else:
        where, transition = f"at word {position}", f"{names[row[position - 1]]} -> {names[row[position]]}"
    hint = (
        "Tags that start an entity with I- are IOB1: convert them (hf_ctx.tag_schemes.convert_tags(tags, "
        "'IOB1', 'IOB2'); run_ner.py converts CoNLL files itself)"
        if transition.split(" -> ")[-1].startswith("I-")
        else "The data is in another scheme: convert it (hf_ctx.tag_schemes.convert_tags)"
    )
    return ValueError(
        f"the labels of sentence {sentence} of the batch break the {config.tag_scheme} tag scheme "
        f"{where}: {transition} is not allowed. {hint}, or give the model the scheme of the data (tag_scheme)"
    )


# --- masks ------------------------------------------------------------------------------------------------------


def not_binary_count(mask: torch.Tensor) -> torch.Tensor:
    """0-d: how many values of `mask` are neither 0 nor 1 (0 for a boolean mask), a flag for `values_outside`.
    Every mask a model reads (attention masks, a CRF's word mask) holds 1 and 0 only, as booleans, integers or
    floats: another value (0.5, 2, an additive -inf) would be read as 1 or inverted in silence."""
    if mask.dtype == torch.bool:
        return torch.zeros((), dtype=torch.long, device=mask.device)
    return ((mask != 0) & (mask != 1)).sum()


def not_binary_error(name: str, count: int, meaning: str, hint: str = "") -> ValueError:
    """The error of a mask (`name`) with `count` values other than 0 and 1; `meaning` says what 1 and 0 mark."""
    return ValueError(f"{name} must hold {meaning}; it has {count} other values{hint}")


def check_word_mask(word_mask: torch.Tensor, attention_mask, shape: tuple, source: str = "word_mask") -> None:
    """A `ValueError` unless a sub-word tagger's CRF word mask (B, T) has the inputs' `shape`, holds 0 and 1 only,
    and marks no padding token (attention_mask 0) as a word: the CRF would decode it as one. `source` names where
    the mask came from ("word_mask", or "labels" when it is where they are not -100). One host sync."""
    check_tensors(word_mask=word_mask)
    if tuple(word_mask.shape) != tuple(shape):
        raise ValueError(f"{source} has shape {tuple(word_mask.shape)}, expected (batch, tokens) = {tuple(shape)}")
    if not host_syncs_allowed(word_mask) or word_mask.numel() == 0:
        return
    flags = [not_binary_count(word_mask)]
    if isinstance(attention_mask, torch.Tensor) and tuple(attention_mask.shape) == tuple(shape):
        flags.append(((word_mask != 0) & (attention_mask == 0)).any())
    _, (not_binary, *on_padding) = values_outside([], flags)
    if not_binary:
        raise not_binary_error(source, not_binary, "1 at the first sub-token of each word and 0 elsewhere")
    if on_padding and on_padding[0]:
        what = "a label other than -100" if source == "labels" else "1"
        raise ValueError(
            f"{source} marks a padding token (attention_mask 0) as a word ({what}); words are real tokens"
        )


# --- BERT: token ids --------------------------------------------------------------------------------------------


def check_bert_inputs(
    config, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, model_dtype=None
) -> None:
    """A `ValueError` unless BERT's inputs fit `config`: exactly one of `input_ids` (B, T) int64 or int32 and
    `inputs_embeds` (B, T, hidden_size), not empty, at most `max_position_embeddings` long; `attention_mask` and
    `token_type_ids` (B, T), `position_ids` (B, T), (1, T) or (T,); token type and position ids int64 or int32;
    ids in their embeddings' ranges; a mask of 0 and 1 only. `model_dtype`, the dtype of the model's weights:
    `inputs_embeds` of a wider floating-point dtype (float64 into a float32 model, float32 into a bfloat16 one)
    is refused, where LayerNorm would fail on the mixed dtypes (a narrower one is promoted, as in transformers)."""
    check_bert_tensors(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
    if input_ids is not None:
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (batch, tokens), got {tuple(input_ids.shape)}")
        check_id_dtype("input_ids", input_ids, "token ids")
        shape = tuple(input_ids.shape)
    else:
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != config.hidden_size:
            raise ValueError(
                f"inputs_embeds must have shape (batch, tokens, {config.hidden_size}), got {tuple(inputs_embeds.shape)}"
            )
        if not inputs_embeds.dtype.is_floating_point:
            raise ValueError(f"inputs_embeds must be floating-point vectors, got dtype {inputs_embeds.dtype}")
        check_embeds_dtype(inputs_embeds, model_dtype)
        shape = tuple(inputs_embeds.shape[:2])
    if 0 in shape:
        raise ValueError(f"the batch is empty (shape {shape}); pass at least one sequence of at least one token")
    if shape[1] > config.max_position_embeddings:
        raise ValueError(
            f"sequence length {shape[1]} is longer than the model allows (max_position_embeddings="
            f"{config.max_position_embeddings}); truncate the input (tokenizer(..., truncation=True))"
        )
    for name, tensor in [("attention_mask", attention_mask), ("token_type_ids", token_type_ids)]:
        if tensor is not None and tuple(tensor.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but input_ids has shape {shape}")
    if position_ids is not None and tuple(position_ids.shape) not in (shape, (1, shape[1]), (shape[1],)):
        raise ValueError(
            f"position_ids has shape {tuple(position_ids.shape)}; expected (batch, tokens) = {shape}, "
            f"(1, {shape[1]}) or ({shape[1]},)"
        )
    check_id_dtype("token_type_ids", token_type_ids, "segment ids")
    check_id_dtype("position_ids", position_ids, "positions")
    if host_syncs_allowed(input_ids if input_ids is not None else inputs_embeds):
        check_bert_values(config, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)


def check_choice_inputs(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds) -> int:
    """A multiple-choice model's inputs before it flattens the choices: exactly one of `input_ids` (B, C, T) and
    `inputs_embeds` (B, C, T, H), and `attention_mask`, `token_type_ids`, `position_ids` of shape (B, C, T). A
    `ValueError` names the 3-D shapes: flattened to (B * C, T), a mask of the choices' transpose (C, B, T) would
    pass for the (B * C, T) shape and mask the wrong sequences. Returns C; the flattened inputs then take
    `check_bert_inputs`."""
    check_bert_tensors(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
    if input_ids is not None:
        reference, shape = "input_ids", tuple(input_ids.shape)
        if input_ids.dim() != 3:
            raise ValueError(f"multiple-choice input_ids must have shape (batch, choices, tokens), got {shape}")
    else:
        reference, shape = "inputs_embeds", tuple(inputs_embeds.shape[:3])
        if inputs_embeds.dim() != 4:
            raise ValueError(
                "multiple-choice inputs_embeds must have shape (batch, choices, tokens, hidden_size), got "
                f"{tuple(inputs_embeds.shape)}"
            )
    for name, tensor in [
        ("attention_mask", attention_mask),
        ("token_type_ids", token_type_ids),
        ("position_ids", position_ids),
    ]:
        if tensor is not None and tuple(tensor.shape) != shape:
            raise ValueError(
                f"{name} has shape {tuple(tensor.shape)} but {reference} has (batch, choices, tokens) = {shape}"
            )
    return shape[1]


def check_bert_tensors(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds) -> None:
    """BERT's inputs (flat or with choices): exactly one of `input_ids` and `inputs_embeds`, and tensors or None."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("pass exactly one of input_ids or inputs_embeds")
    check_tensors(
        input_ids=input_ids,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        position_ids=position_ids,
        inputs_embeds=inputs_embeds,
    )


def check_id_dtype(name: str, ids: torch.Tensor | None, what: str = "ids") -> None:
    """A `ValueError` unless `ids` (when given) are integers of a dtype an embedding lookup takes (int64 or int32):
    float ids would fail inside the lookup with an error naming neither the argument nor the dtype."""
    if ids is not None and ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{name} must be integer {what} (int64 or int32), got dtype {ids.dtype}")


def check_embeds_dtype(inputs_embeds: torch.Tensor, model_dtype) -> None:
    """A `ValueError` when `inputs_embeds` has a wider floating-point dtype than the model's weights
    (`model_dtype`; None: not checked): the model adds its float32 (bfloat16, ...) embeddings to them and
    LayerNorm refuses the mixed dtypes. A narrower dtype is promoted to the model's, and under autocast the
    kernels choose their dtypes themselves."""
    if model_dtype is None or torch.promote_types(inputs_embeds.dtype, model_dtype) == model_dtype:
        return
    if torch.is_autocast_enabled(inputs_embeds.device.type):
        return
    raise ValueError(
        f"inputs_embeds has dtype {inputs_embeds.dtype}, but the model computes in {model_dtype}: pass "
        f"inputs_embeds.to({model_dtype})"
    )


def check_tensors(**arguments) -> None:
    """A `TypeError` naming the first of `arguments` (name=value) that is neither None nor a tensor (a list of
    ids would fail later, as an attribute error deep in the model)."""
    for name, value in arguments.items():
        if value is not None and not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{name} must be a torch.Tensor (tokenizer(..., return_tensors='pt')), got {type(value).__name__}"
            )


def check_bert_values(config, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds=None) -> None:
    """`check_bert_inputs`' value checks, in one host sync: the ids' ranges, an attention mask of 1 for real
    tokens and 0 for padding, and `inputs_embeds` without NaN or infinity (which would silently make every output
    NaN). A mask of other values, e.g. an additive 0 / -inf mask, would be read inverted, so it is refused."""
    ids = [
        (name, tensor, limit)
        for name, tensor, limit in [
            ("input_ids", input_ids, config.vocab_size),
            ("token_type_ids", token_type_ids, config.type_vocab_size),
            ("position_ids", position_ids, config.max_position_embeddings),
        ]
        if tensor is not None
    ]
    flags = []
    if attention_mask is not None and attention_mask.dtype != torch.bool:
        flags.append(not_binary_count(attention_mask))
    if inputs_embeds is not None:
        flags.append(~torch.isfinite(inputs_embeds).all())
    outside, flag_values = values_outside([(tensor, limit) for _, tensor, limit in ids], flags)
    for (name, _, limit), bad in zip(ids, outside):
        if bad is not None:
            raise ValueError(f"{name} contains {bad}, outside [0, {limit}) (the model's {name} range)")
    if inputs_embeds is not None and flag_values.pop():
        raise ValueError("inputs_embeds holds NaN or infinite values: every output would be NaN")
    not_binary = flag_values
    if not_binary and not_binary[0] > 0:
        raise not_binary_error(
            "attention_mask",
            not_binary[0],
            "1 for real tokens and 0 for padding",
            " (an additive 0 / -inf mask? pass (mask == 0) instead)",
        )


# --- ELMo and TagLM: words as character ids, word ids, cached biLM states ---------------------------------------


def elmo_input_mask(config, input_ids, attention_mask) -> torch.Tensor:
    """`check_character_ids` with an ELMo config's width and character range, and no more words than
    `config.max_sentence_words`: the word mask (B, W)."""
    check_sentence_length(config, input_ids)
    return check_character_ids(
        input_ids, attention_mask, config.max_characters_per_token, config.char_cnn["n_characters"]
    )


def check_sentence_length(config, input_ids) -> None:
    """A `ValueError` when `input_ids` (B, W, C) hold more words per sentence than an ELMo config's
    `max_sentence_words` (a shape check: no host sync)."""
    if isinstance(input_ids, torch.Tensor) and input_ids.dim() >= 2 and input_ids.shape[1] > config.max_sentence_words:
        raise ValueError(
            f"the input has {input_ids.shape[1]} words per sentence, more than this ELMo's max_sentence_words="
            f"{config.max_sentence_words}; split the text into sentences, encode with truncation=True (the "
            "tokenizer keeps the first model_max_length words), or raise config.max_sentence_words"
        )


def check_has_words(input_ids: torch.Tensor, model: str) -> None:
    """A task model's ELMo-encoded input holds at least one word: its RNNs cannot run over none (PyTorch's
    "Cannot pack empty tensors"). The biLM itself reads an empty sentence (it predicts </S> after <S>)."""
    if input_ids.shape[1] == 0:
        raise ValueError(f"input_ids hold no words (shape {tuple(input_ids.shape)}); {model} labels at least one word")


def check_character_ids(input_ids, attention_mask, max_characters: int, n_characters: int) -> torch.Tensor:
    """Check ELMo-encoded words (the inputs of ELMo and TagLM) and return the word mask (B, W) as booleans.

    Args:
        input_ids: (B, W, max_characters) character ids, as `ElmoTokenizer` returns them.
        attention_mask: (B, W) 1 on words, 0 on padding (words first), or None: words are the rows of
            `input_ids` that are not all 0.
        max_characters, n_characters: the model's width and character-id range.
    """
    if input_ids is None:
        raise ValueError("input_ids (character ids from ElmoTokenizer) are required")
    check_tensors(input_ids=input_ids, attention_mask=attention_mask)
    if input_ids.dim() != 3 or input_ids.shape[-1] != max_characters:
        raise ValueError(
            f"input_ids must be character ids of shape (batch, words, {max_characters}) as "
            f"ElmoTokenizer returns them, got {tuple(input_ids.shape)}"
        )
    if input_ids.dtype != torch.int64:
        raise ValueError(
            f"input_ids must be integer character ids (int64, as ElmoTokenizer returns them), got dtype {input_ids.dtype}"
        )
    if input_ids.shape[0] == 0:
        raise ValueError("input_ids hold no sentences (batch size 0)")
    if attention_mask is None:
        attention_mask = (input_ids != 0).any(dim=-1)
    elif tuple(attention_mask.shape) != tuple(input_ids.shape[:2]):
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, expected (batch, words) = "
            f"{tuple(input_ids.shape[:2])}"
        )
    mask = attention_mask.bool()
    if not host_syncs_allowed(input_ids) or input_ids.numel() == 0:
        return mask
    word_after_padding = (mask[:, 1:] & ~mask[:, :-1]).any()
    word_without_characters = (mask & (input_ids == 0).all(dim=-1)).any()
    (outside,), (word_after_padding, word_without_characters, not_binary) = values_outside(
        [(input_ids, n_characters)], [word_after_padding, word_without_characters, not_binary_count(attention_mask)]
    )
    if outside is not None:
        raise ValueError(f"input_ids contains the character id {outside}, outside [0, {n_characters})")
    if not_binary:
        raise not_binary_error("attention_mask", not_binary, "1 on words and 0 on padding")
    if word_after_padding:
        raise ValueError(
            "attention_mask must mark each sentence's words first and padding after them "
            "(right padding); found a word after padding"
        )
    if word_without_characters:
        raise ValueError(
            "attention_mask marks a word whose character ids are all 0 (padding); every word needs its character ids"
        )
    return mask


def check_word_ids(config, input_word_ids: torch.Tensor, mask: torch.Tensor) -> None:
    """A `ValueError` unless `input_word_ids` has the word mask's shape (B, W) and, at the words, ids in
    `[0, config.vocab_size)`. `config` is an ELMo or a TagLM config: both have `vocab_size`, the size of the
    tokenizer's word vocabulary."""
    check_tensors(input_word_ids=input_word_ids)
    check_id_dtype("input_word_ids", input_word_ids, "word ids")
    if tuple(input_word_ids.shape) != tuple(mask.shape):
        raise ValueError(
            f"input_word_ids has shape {tuple(input_word_ids.shape)}, expected (batch, words) = {tuple(mask.shape)}"
        )
    if host_syncs_allowed(mask):
        words = input_word_ids.masked_fill(~mask, 0)  # padding may hold any id; 0 is in range
        (outside,), _ = values_outside([(words, config.vocab_size)])
        if outside is not None:
            raise ValueError(
                f"input_word_ids contains {outside}, outside the word vocabulary [0, vocab_size={config.vocab_size})"
            )


def check_bilm_hidden_states(config, bilm_hidden_states: torch.Tensor, mask: torch.Tensor) -> None:
    """A `ValueError` unless precomputed biLM states (what a frozen biLM gives for these words, e.g. from a cache)
    have the shape (B, W, L + 1, 2P) of the ELMo config `config`'s biLM for the word mask (B, W) and a
    floating-point dtype, and hold no NaN or infinity (padding included: the scalar mix multiplies padding by 0,
    and NaN * 0 is NaN), which would silently make the outputs NaN. One host sync."""
    check_tensors(bilm_hidden_states=bilm_hidden_states)
    expected = (*mask.shape, config.num_output_layers, config.hidden_size)
    if tuple(bilm_hidden_states.shape) != expected or not bilm_hidden_states.dtype.is_floating_point:
        raise ValueError(
            f"bilm_hidden_states has shape {tuple(bilm_hidden_states.shape)} and dtype {bilm_hidden_states.dtype}; "
            f"expected floats of shape (batch, words, layers, 2 * projection_dim) = {expected}"
        )
    if host_syncs_allowed(bilm_hidden_states) and bilm_hidden_states.numel() > 0:
        _, (not_finite,) = values_outside([], [~torch.isfinite(bilm_hidden_states).all()])
        if not_finite:
            raise ValueError(
                "bilm_hidden_states hold NaN or infinite values (a damaged cache?): every output would be NaN"
            )
