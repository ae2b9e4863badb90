"""Word-level pipelines for models whose tokenizer gives character ids (TagLM, ELMo):
`pipeline("token-classification")` and `pipeline("feature-extraction")`; and `SubwordTokenClassificationPipeline`
for a sub-word tagger whose CRF decodes words (BERT with `use_crf`).

transformers' `TokenClassificationPipeline` assumes sub-word tokenizers: it reads each position's token back with
`tokenizer.convert_ids_to_tokens(int(input_ids[i]))` and gets character offsets only from fast tokenizers.
`ElmoTokenizer` is a slow tokenizer whose `input_ids` are (words, 50) character ids, so that code cannot run.
This subclass keeps the pipeline's task, arguments, output format and entity grouping and changes only what
differs: the words are the text split as CoNLL and the Penn Treebank split it (punctuation off words:
"flew to Brussels." -> "flew", "to", "Brussels", "."; `hf_ctx.data.words`), or the given list of words, their
character offsets into the text are known exactly, and each word is one model position. A text of several
sentences is tagged sentence by sentence (offsets still into the whole text).

    >>> from transformers import pipeline
    >>> from hf_ctx import WordTokenClassificationPipeline
    >>> tagger = pipeline("token-classification", model="runs/taglm", pipeline_class=WordTokenClassificationPipeline,
    ...                   aggregation_strategy="simple")
    >>> tagger("Peter Blackburn flew to Brussels.")
    [{'entity_group': 'PER', 'score': 0.99, 'word': 'Peter Blackburn', 'start': 0, 'end': 15}, ...]

For TagLM (and ELMo with `use_crf`) the per-word scores are the softmax of the CRF max-marginals, so the tags are
the CRF's Viterbi decoding.
"""

import logging

import numpy as np
import torch
from transformers.pipelines.feature_extraction import FeatureExtractionPipeline
from transformers.pipelines.token_classification import AggregationStrategy, TokenClassificationPipeline

from ..data.conll import words_as_read
from ..data.words import split_sentences, word_spans
from . import option_kinds as kinds
from .families import check_tokenizer_fits

# --- the call arguments users pass, checked where they enter ---------------------------------------------------

AGGREGATION_STRATEGIES = [strategy.value for strategy in AggregationStrategy]


def check_call_arguments(aggregation_strategy=None, ignore_labels=None, stride=None, delimiter=None, **flags) -> None:
    """Refuse a pipeline call argument of the wrong kind in one `ValueError`/`TypeError` that names it (else a
    `KeyError: 'BAD'`, an `OverflowError` of the tokenizer, or a label test that fails inside a loop); `flags`:
    arguments that are true or false (`is_split_into_words`, `return_tensors`)."""
    if not (
        aggregation_strategy is None
        or isinstance(aggregation_strategy, AggregationStrategy)
        or (isinstance(aggregation_strategy, str) and aggregation_strategy.lower() in AGGREGATION_STRATEGIES)
    ):
        raise ValueError(f"aggregation_strategy must be one of {AGGREGATION_STRATEGIES}, got {aggregation_strategy!r}")
    if ignore_labels is not None and (
        isinstance(ignore_labels, str)
        or not isinstance(ignore_labels, (list, tuple, set))
        or not all(isinstance(label, str) for label in ignore_labels)
    ):
        raise TypeError(f"ignore_labels must be a list of labels, e.g. ['O'], got {ignore_labels!r}")
    if stride is not None:
        kinds.count_or_zero("windows that do not overlap").check("stride", stride)
    if delimiter is not None and not isinstance(delimiter, str):
        raise TypeError(f"delimiter must be a string (what joins given words), got {delimiter!r}")
    for name, value in flags.items():
        if value is not None:
            kinds.check_flag(name, value)


def check_inputs(inputs) -> None:
    """Refuse what no pipeline call reads as text: a number, None, bytes, a dict (transformers would say "At least
    one input is required", or take a number for a batch)."""
    if inputs is None or isinstance(inputs, (int, float, bytes, dict)):
        raise TypeError(
            "the pipeline's input must be a text, a list of texts, or (with is_split_into_words=True) a list of "
            f"words; got {type(inputs).__name__} {inputs!r:.40}"
        )


def check_word_level_tokenizer(pipeline) -> None:
    """Refuse a word-level pipeline over a sub-word tokenizer (BERT's): its positions are sub-tokens and [CLS],
    not words, so the tags and vectors would be read off the wrong positions without an error."""
    if not any(cls.__name__ == "ElmoTokenizer" for cls in type(pipeline.tokenizer).__mro__):
        raise ValueError(
            f"{type(pipeline).__name__} reads one position per word, from a word-level tokenizer (ElmoTokenizer: "
            f"ELMo, TagLM); this model's tokenizer is {type(pipeline.tokenizer).__name__}, of sub-words. For BERT use "
            "pipeline(..., pipeline_class=hf_ctx.SubwordTokenClassificationPipeline), or transformers' own pipeline"
        )


logger = logging.getLogger(__name__)

# A window's overlap with the next, as a share of the tokens a window holds (transformers' QA default: 128 of 384).
STRIDE_SHARE = 1 / 4


def input_sentences(
    sentence,
    is_split_into_words: bool = False,
    delimiter: str = " ",
    by_sentence: bool = True,
    splitter: str = "treebank",
) -> tuple[str, list[list[str]], list[list[tuple[int, int]]]]:
    """The text of a pipeline input, its sentences' words and each word's character offsets (start, end).

    A string is split into words by `hf_ctx.data.words` under `splitter` (the tokenizer's `word_splitter`:
    "treebank", punctuation off words as CoNLL and the Penn Treebank split text, or "whitespace"), and into
    sentences unless `by_sentence=False`; offsets are into the string. A list of words
    (`is_split_into_words=True`) is one sentence, joined with `delimiter`, offsets into the joined text.
    """
    if is_split_into_words:
        if not isinstance(sentence, list):
            raise ValueError("When `is_split_into_words=True`, `sentence` must be a list of words.")
        words, offsets, start = list(sentence), [], 0
        for word in words:
            offsets.append((start, start + len(word)))
            start += len(word) + len(delimiter)
        return delimiter.join(words), [words], [offsets]
    if not isinstance(sentence, str):
        raise ValueError("When `is_split_into_words=False`, `sentence` must be an untokenized string.")
    sentences = split_sentences(sentence, splitter) if by_sentence else [word_spans(sentence, splitter)]
    sentences = [spans for spans in sentences if spans] or [[]]
    words = [[word for word, _, _ in spans] for spans in sentences]
    offsets = [[(start, end) for _, start, end in spans] for spans in sentences]
    return sentence, words, offsets


def word_inputs(tokenizer, text: str, words: list[str], offsets: list[tuple[int, int]]) -> dict:
    """A word-level pipeline's model inputs for one sentence's `words` (the tokenizer's tensors, batch of one) with
    the keys "sentence", "words" and "word_offsets" that `_forward` passes on."""
    inputs = tokenizer(words, is_split_into_words=True, return_tensors="pt")
    return {**inputs, "sentence": text, "words": words, "word_offsets": offsets}


class TokenizerFitsModelMixin:
    """Mixed into hf_ctx's pipelines: the tokenizer is checked against the model where the pipeline is built
    (`check_tokenizer_fits`), so `pipeline(task, model=..., tokenizer=<another>)` refuses a tokenizer whose ids
    the model cannot read or reads as other words, in one line naming its files."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.tokenizer is not None:
            source = getattr(self.tokenizer, "name_or_path", None) or "the tokenizer given"
            check_tokenizer_fits(self.model.config, self.tokenizer, None, source)


class WordTokenClassificationPipeline(TokenizerFitsModelMixin, TokenClassificationPipeline):
    """Token classification over whole words, for models fed by a word-level (character-id) tokenizer.

    Call arguments as for `TokenClassificationPipeline`: `aggregation_strategy` ("none", "simple"; "first", "max"
    and "average" give the same result as "simple", since every position is a whole word), `ignore_labels`,
    `is_split_into_words` and `delimiter`. `stride` and `offset_mapping` do not apply (no sub-words, no windows):
    a sentence longer than the model's `max_sentence_words` is tagged in pieces of that many words, with a warning.
    """

    def _sanitize_parameters(
        self,
        ignore_labels=None,
        aggregation_strategy=None,
        offset_mapping=None,
        is_split_into_words=False,
        stride=None,
        delimiter=None,
    ):
        check_call_arguments(
            aggregation_strategy, ignore_labels, None, delimiter, is_split_into_words=is_split_into_words
        )
        if stride is not None:
            raise ValueError("stride does not apply to word-level taggers: they read the whole sentence")
        if offset_mapping is not None:
            raise ValueError("offset_mapping does not apply to word-level taggers: word offsets are computed")
        preprocess_params = {
            "is_split_into_words": is_split_into_words,
            "delimiter": " " if delimiter is None else delimiter,
        }
        postprocess_params = {}
        if aggregation_strategy is not None:
            if isinstance(aggregation_strategy, str):
                aggregation_strategy = AggregationStrategy[aggregation_strategy.upper()]
            postprocess_params["aggregation_strategy"] = aggregation_strategy
        if ignore_labels is not None:
            postprocess_params["ignore_labels"] = ignore_labels
        return preprocess_params, {}, postprocess_params

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_word_level_tokenizer(self)

    def max_sentence_words(self) -> int | None:
        """The most words the model reads in one sentence (its biLM's `max_sentence_words`), None when unlimited."""
        bilm = getattr(self.model, "bilm", None)
        config = bilm.config if bilm is not None else self.model.config
        return getattr(config, "max_sentence_words", None)

    def __call__(self, inputs, **kwargs):
        check_inputs(inputs)
        return super().__call__(inputs, **kwargs)

    def preprocess(self, sentence, is_split_into_words=False, delimiter=" "):
        splitter = getattr(self.tokenizer, "word_splitter", "treebank")
        text, sentences, offsets = input_sentences(sentence, is_split_into_words, delimiter, splitter=splitter)
        # A sentence longer than the model reads is tagged in pieces of that many words (as run_ner.py splits it).
        limit = self.max_sentence_words()
        pieces = []
        for words, word_offsets in zip(sentences, offsets):
            if limit and len(words) > limit:
                logger.warning(
                    "a sentence of %d words (characters %d-%d) is longer than the %d words this model reads: it is "
                    "tagged in pieces of %d words",
                    len(words),
                    word_offsets[0][0],
                    word_offsets[-1][1],
                    limit,
                    limit,
                )
            step = limit if limit and len(words) > limit else max(len(words), 1)
            pieces += [(words[i : i + step], word_offsets[i : i + step]) for i in range(0, max(len(words), 1), step)]
        for i, (words, word_offsets) in enumerate(pieces):
            yield {**word_inputs(self.tokenizer, text, words, word_offsets), "is_last": i == len(pieces) - 1}

    def _forward(self, model_inputs):
        extras = {key: model_inputs.pop(key) for key in ("sentence", "words", "word_offsets", "is_last")}
        # No word to tag: an empty text, or (with `batch_size` > 1) a batch of only empty texts, padded to 0 words.
        batch, width = model_inputs["input_ids"].shape[:2]
        if width == 0:
            return {"logits": torch.zeros(batch, 0, len(self.model.config.id2label)), **extras}
        output = self.model(**model_inputs)
        logits = output["logits"] if isinstance(output, dict) else output[0]
        return {"logits": logits, **extras}

    def postprocess(self, all_outputs, aggregation_strategy=AggregationStrategy.NONE, ignore_labels=None):
        if ignore_labels is None:
            ignore_labels = ["O"]
        if aggregation_strategy in (AggregationStrategy.FIRST, AggregationStrategy.MAX, AggregationStrategy.AVERAGE):
            aggregation_strategy = AggregationStrategy.SIMPLE  # every position is already a whole word
        entities = []
        for output in all_outputs:
            logits = output["logits"][0].float().numpy()
            scores = np.exp(logits - logits.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            pre_entities = [
                {"word": word, "scores": word_scores, "start": start, "end": end, "index": index, "is_subword": False}
                for index, (word, word_scores, (start, end)) in enumerate(
                    zip(output["words"], scores, output["word_offsets"])
                )
            ]
            entities += [
                entity
                for entity in self.aggregate(pre_entities, aggregation_strategy)
                if entity.get("entity", entity.get("entity_group")) not in ignore_labels
            ]
        return entities


class SubwordTokenClassificationPipeline(TokenizerFitsModelMixin, TokenClassificationPipeline):
    """`pipeline("token-classification")` for a sub-word tagger whose CRF decodes words
    (`CtxBertForTokenClassification` with `use_crf`).

        >>> from transformers import pipeline
        >>> from hf_ctx import SubwordTokenClassificationPipeline
        >>> tagger = pipeline("token-classification", model="runs/bert_crf",
        ...                   pipeline_class=SubwordTokenClassificationPipeline)
        >>> tagger("Peter Blackburn flew to Brussels")
        [{'entity_group': 'PER', 'score': 0.98, 'word': 'Peter Blackburn', 'start': 0, 'end': 15}, ...]

    The model reads only what the tokenizer gives, which does not say where words start; this pipeline passes it
    `word_mask`: 1 at each word's first sub-token, by the rule the pipeline joins sub-tokens into words with (a
    token that starts with the tokenizer's continuing-subword prefix, WordPiece's `##`, continues the word
    before it; special tokens are no word). The words' scores are the softmax of the CRF max-marginals, so the
    tags are the CRF's Viterbi decoding. Aggregation defaults to "first" (one entry per word, grouped into
    entities); the other strategies and arguments are `TokenClassificationPipeline`'s. Given a list of words
    (`is_split_into_words=True`), a word the tokenizer maps to no token (a control character, a soft hyphen, a
    lone variation selector) is read as the unknown token, as `run_ner.py` reads it: every word gets a tag. A text
    longer than the tokenizer's `model_max_length` is read in windows that overlap by `stride` tokens (default a
    quarter of a window), so it is tagged to its end; transformers' pipeline, without `stride`, tags the first
    window only. For a model without a CRF it is that pipeline with these defaults.
    """

    def _sanitize_parameters(
        self,
        ignore_labels=None,
        aggregation_strategy=None,
        stride=None,
        delimiter=None,
        is_split_into_words=None,
        **kwargs,
    ):
        """`TokenClassificationPipeline`'s, with windows by default: a text longer than the model's window is read in
        windows of `tokenizer.model_max_length` tokens that overlap by `stride` (default: a quarter of a window), so
        every word is tagged. With `aggregation_strategy="none"` (one entry per overlapping token) or a slow
        tokenizer there are no windows, and a text that is cut is a warning saying where."""
        check_call_arguments(
            aggregation_strategy, ignore_labels, stride, delimiter, is_split_into_words=is_split_into_words
        )
        given = {"ignore_labels": ignore_labels, "delimiter": delimiter, "is_split_into_words": is_split_into_words}
        kwargs.update({name: value for name, value in given.items() if value is not None})
        aggregation = aggregation_strategy  # this call's, else the one given at construction, else "first"
        if aggregation is None:
            aggregation = getattr(self, "_postprocess_params", {}).get("aggregation_strategy", "first")
        if isinstance(aggregation, str):
            aggregation = AggregationStrategy[aggregation.upper()]
        limit = self.tokenizer.model_max_length
        if stride is None and aggregation != AggregationStrategy.NONE and self.tokenizer.is_fast and limit < 10**6:
            stride = max(1, int((limit - self.tokenizer.num_special_tokens_to_add()) * STRIDE_SHARE))
        preprocess_params, forward_params, postprocess_params = super()._sanitize_parameters(
            aggregation_strategy=aggregation_strategy, stride=stride, **kwargs
        )
        if stride is None:  # no windows, also where the construction's arguments had them
            preprocess_params["tokenizer_params"] = {}
        return preprocess_params, forward_params, postprocess_params

    def _warn_if_cut(self, sentence, chunks: list[dict]) -> None:
        """A warning when a text read in one window (no stride) lost tokens to truncation, saying where its tags
        stop."""
        if len(chunks) != 1:
            return
        if isinstance(sentence, list):  # words: the last one read
            read = max((word for word in chunks[0]["word_ids"] if word is not None), default=-1) + 1
            if read < len(sentence):
                logger.warning(
                    "the text has %d words; the model reads %d tokens, up to word %d: the rest is not tagged (an "
                    "aggregation_strategy other than 'none' reads it all, in windows)",
                    len(sentence),
                    self.tokenizer.model_max_length,
                    read,
                )
            return
        offsets = chunks[0]["offset_mapping"][0]
        read = int(offsets[:, 1].max()) if len(offsets) else 0
        if sentence[read:].strip():
            logger.warning(
                "the text has %d characters; the model reads %d tokens, up to character %d: the rest is not "
                "tagged (an aggregation_strategy other than 'none' reads it all, in windows)",
                len(sentence),
                self.tokenizer.model_max_length,
                read,
            )

    def __call__(self, inputs, **kwargs):
        check_inputs(inputs)
        return super().__call__(inputs, **kwargs)

    def preprocess(self, sentence, offset_mapping=None, **preprocess_params):
        if not preprocess_params.get("tokenizer_params") and self.tokenizer.is_fast:
            chunks = list(self._preprocess(sentence, offset_mapping, **preprocess_params))
            self._warn_if_cut(sentence, chunks)
            yield from chunks
            return
        yield from self._preprocess(sentence, offset_mapping, **preprocess_params)

    def _preprocess(self, sentence, offset_mapping=None, **preprocess_params):
        """`TokenClassificationPipeline.preprocess`; a list of words (`is_split_into_words=True`) is read as the
        tagger was trained to read it (`data.conll.words_as_read`): a word the tokenizer maps to no token is
        read as its unknown token, and so gets an entry and a tag, with its own text and offsets."""
        if not (preprocess_params.get("is_split_into_words") and isinstance(sentence, list)):
            yield from super().preprocess(sentence, offset_mapping, **preprocess_params)
            return
        readable = words_as_read(self.tokenizer, [sentence])[0]
        text, _, offsets = input_sentences(sentence, True, preprocess_params["delimiter"])
        replaced = {i for i, (given, read) in enumerate(zip(sentence, readable)) if given != read}
        for model_inputs in super().preprocess(readable, offset_mapping, **preprocess_params):
            model_inputs["word_to_chars_map"] = offsets[0]  # the words as given, not as read
            if model_inputs["sentence"] is not None:
                model_inputs["sentence"] = text
            for position, word in enumerate(model_inputs["word_ids"]):
                if word in replaced:  # the unknown token stands for the whole word as given
                    model_inputs["offset_mapping"][0, position] = torch.tensor([0, len(sentence[word])])
            yield model_inputs

    def _forward(self, model_inputs):
        if getattr(self.model.config, "use_crf", False):
            model_inputs["word_mask"] = self.word_starts(
                model_inputs["input_ids"], model_inputs["special_tokens_mask"]
            )
        return super()._forward(model_inputs)

    def word_starts(self, input_ids: torch.Tensor, special_tokens_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) booleans, True at the first sub-token of each word of `input_ids` (B, T)."""
        backend = getattr(self.tokenizer, "_tokenizer", None)
        prefix = getattr(getattr(backend, "model", None), "continuing_subword_prefix", None)
        if not prefix:
            raise ValueError(
                f"{type(self.tokenizer).__name__} does not mark the sub-tokens that continue a word (as WordPiece's "
                "##): the pipeline cannot tell the CRF where words start; pass the model word_mask yourself"
            )
        starts = [
            [not token.startswith(prefix) for token in self.tokenizer.convert_ids_to_tokens(row)]
            for row in input_ids.tolist()
        ]
        return torch.tensor(starts, dtype=torch.bool) & ~special_tokens_mask.bool()

    def postprocess(self, all_outputs, aggregation_strategy=AggregationStrategy.FIRST, ignore_labels=None):
        """`TokenClassificationPipeline.postprocess`; the windows of a long text are joined token by token before
        sub-tokens are joined into words and words into entities: each token is taken from one window, the one
        it lies in beyond the middle of the overlap. (transformers groups each window into entities first and then
        keeps the longest of overlapping entities, which drops the words of the shorter one that lie outside it.)
        An entity's "word" is the text between its offsets, as the word-level pipelines give it (transformers
        decodes the tokens: "cafe" for "café" under an accent-stripping tokenizer, control characters lost)."""
        entities = self._entities(all_outputs, aggregation_strategy, ignore_labels)
        sentence = all_outputs[0]["sentence"]
        if aggregation_strategy != AggregationStrategy.NONE and isinstance(sentence, str):
            for entity in entities:
                if entity.get("start") is not None and entity.get("end") is not None:
                    entity["word"] = sentence[entity["start"] : entity["end"]]
        return entities

    def _entities(self, all_outputs, aggregation_strategy, ignore_labels):
        if len(all_outputs) == 1:
            return super().postprocess(all_outputs, aggregation_strategy, ignore_labels)
        ignore_labels = ["O"] if ignore_labels is None else ignore_labels
        windows = []
        for output in all_outputs:
            logits = output["logits"][0].float().numpy()
            scores = np.exp(logits - logits.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            offsets = output["offset_mapping"][0] if output["offset_mapping"] is not None else None
            windows.append(
                self.gather_pre_entities(
                    all_outputs[0]["sentence"],
                    output["input_ids"][0],
                    scores,
                    offsets,
                    output["special_tokens_mask"][0].numpy(),
                    aggregation_strategy,
                    word_ids=output.get("word_ids"),
                    word_to_chars_map=all_outputs[0].get("word_to_chars_map"),
                )
            )
        windows = [window for window in windows if window]
        # Between two windows, the middle of their overlap: the tokens starting before it come from the first.
        middles = [(after[0]["start"] + before[-1]["end"]) / 2 for before, after in zip(windows, windows[1:])]
        bounds = [-np.inf, *middles, np.inf]
        tokens = [
            token
            for window, low, high in zip(windows, bounds, bounds[1:])
            for token in window
            if low <= token["start"] < high
        ]
        return [
            entity
            for entity in self.aggregate(tokens, aggregation_strategy)
            if entity.get("entity", entity.get("entity_group")) not in ignore_labels
        ]


class WordFeatureExtractionPipeline(TokenizerFitsModelMixin, FeatureExtractionPipeline):
    """`pipeline("feature-extraction")` for ELMo: one vector per input word, with the word and its offsets.

        >>> from transformers import pipeline
        >>> from hf_ctx import WordFeatureExtractionPipeline
        >>> extractor = pipeline("feature-extraction", model="elmo-original",
        ...                      pipeline_class=WordFeatureExtractionPipeline, output="average")
        >>> extractor("The cat sat")
        [{'word': 'The', 'start': 0, 'end': 3, 'vector': [...]}, ...]

    Arguments (at construction or per call): `output`: "top" (the top biLSTM layer, the default), "average" (the
    mean of the L + 1 layers) or "all" (each vector then is (L + 1, 2P)); `scalar_mix_weights`: one weight per
    layer, the vectors being the weighted sum of the layers (weights used as given); `return_tensors=True`:
    vectors as torch tensors instead of lists; `is_split_into_words` and `delimiter` as for the token-classification
    pipeline. The model is an `ElmoModel` (`AutoModel` of an ELMo checkpoint). With `batch_size` > 1 sentences run
    padded together, and each vector equals that of its sentence run alone (up to float rounding). For whole
    files, `hf_ctx.tools.embed.ElmoEmbedder` (`hf-ctx embed`) sorts sentences by length first.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_word_level_tokenizer(self)

    def _sanitize_parameters(
        self,
        output=None,
        scalar_mix_weights=None,
        is_split_into_words=None,
        delimiter=None,
        return_tensors=None,
        **kwargs,
    ):
        if kwargs:
            raise ValueError(f"unknown argument(s) for the word feature-extraction pipeline: {sorted(kwargs)}")
        check_call_arguments(
            delimiter=delimiter, is_split_into_words=is_split_into_words, return_tensors=return_tensors
        )
        preprocess_params, forward_params, postprocess_params = {}, {}, {}
        if is_split_into_words is not None:
            preprocess_params["is_split_into_words"] = is_split_into_words
        if delimiter is not None:
            preprocess_params["delimiter"] = delimiter
        if output is not None or scalar_mix_weights is not None:
            from .embed import LayerOutput

            num_layers = self.model.config.num_output_layers
            forward_params["layer_output"] = LayerOutput(num_layers, output or "top", scalar_mix_weights)
        if return_tensors is not None:
            postprocess_params["return_tensors"] = return_tensors
        return preprocess_params, forward_params, postprocess_params

    def __call__(self, inputs, **kwargs):
        """Features of one sentence (a string, or a list of words with `is_split_into_words=True`) or of a list of
        sentences: per sentence, a list of {"word", "start", "end", "vector"}."""
        check_inputs(inputs)
        if kwargs.get("is_split_into_words", self._preprocess_params.get("is_split_into_words")) and (
            isinstance(inputs, list) and all(isinstance(word, str) for word in inputs)
        ):
            return super().__call__([inputs], **kwargs)[0]  # one sentence given as its words
        return super().__call__(inputs, **kwargs)

    def preprocess(self, sentence, is_split_into_words=False, delimiter=" "):
        splitter = getattr(self.tokenizer, "word_splitter", "treebank")
        text, words, offsets = input_sentences(sentence, is_split_into_words, delimiter, False, splitter)
        return word_inputs(self.tokenizer, text, words[0], offsets[0])

    def _forward(self, model_inputs, layer_output=None):
        # Batched (`batch_size` > 1), the inputs are padded to the longest sentence and "words" is a list per
        # sentence; the vectors keep their batch axis, which the pipeline splits, and `postprocess` cuts the padding.
        extras = {key: model_inputs.pop(key) for key in ("sentence", "words", "word_offsets")}
        if layer_output is None:
            from .embed import LayerOutput

            layer_output = LayerOutput(self.model.config.num_output_layers, "top")
        batch, width = model_inputs["input_ids"].shape[:2]
        if width == 0:
            return {"vectors": torch.zeros(batch, 0, self.model.config.hidden_size), **extras}
        layers = self.model(**model_inputs, output_hidden_states=True, return_dict=True).hidden_states
        vectors = layer_output(layers)  # (B, W, D), or (B, L + 1, W, D) for "all"
        if vectors.dim() == 4:
            vectors = vectors.transpose(1, 2)  # one (L + 1, D) block per word
        return {"vectors": vectors, **extras}

    def postprocess(self, model_outputs, return_tensors=False):
        words = model_outputs["words"]
        vectors = model_outputs["vectors"][0, : len(words)].float()
        return [
            {"word": word, "start": start, "end": end, "vector": vector if return_tensors else vector.tolist()}
            for word, (start, end), vector in zip(words, model_outputs["word_offsets"], vectors)
        ]
