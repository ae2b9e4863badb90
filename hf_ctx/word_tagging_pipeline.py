"""`pipeline("token-classification")` for word-level taggers whose tokenizer gives character ids (TagLM, ELMo).

transformers' `TokenClassificationPipeline` assumes sub-word tokenizers: it reads each position's token back with
`tokenizer.convert_ids_to_tokens(int(input_ids[i]))` and gets character offsets only from fast tokenizers.
`ElmoTokenizer` is a slow tokenizer whose `input_ids` are (words, 50) character ids, so that code cannot run.
This subclass keeps the pipeline's task, arguments, output format and entity grouping and changes only what
differs: the words are the whitespace-separated pieces of the text (or the given list of words), their character
offsets are known exactly, and each word is one model position.

    >>> from transformers import pipeline
    >>> from hf_ctx import WordTokenClassificationPipeline
    >>> tagger = pipeline("token-classification", model="runs/taglm", pipeline_class=WordTokenClassificationPipeline,
    ...                   aggregation_strategy="simple")
    >>> tagger("Peter Blackburn flew to Brussels")
    [{'entity_group': 'PER', 'score': 0.99, 'word': 'Peter Blackburn', 'start': 0, 'end': 15}, ...]

For TagLM the per-word scores are the softmax of the CRF max-marginals, so the tags are the CRF's Viterbi decoding.
"""

import re

import numpy as np
import torch
from transformers.pipelines.token_classification import AggregationStrategy, TokenClassificationPipeline


class WordTokenClassificationPipeline(TokenClassificationPipeline):
    """Token classification over whole words, for models fed by a word-level (character-id) tokenizer.

    Call arguments as for `TokenClassificationPipeline`: `aggregation_strategy` ("none", "simple"; "first", "max"
    and "average" give the same result as "simple", since every position is a whole word), `ignore_labels`,
    `is_split_into_words` and `delimiter`. `stride` and `offset_mapping` do not apply (no sub-words, no windows).
    """

    def _sanitize_parameters(self, ignore_labels=None, aggregation_strategy=None, offset_mapping=None,
                             is_split_into_words=False, stride=None, delimiter=None):
        if stride is not None:
            raise ValueError("stride does not apply to word-level taggers: they read the whole sentence")
        if offset_mapping is not None:
            raise ValueError("offset_mapping does not apply to word-level taggers: word offsets are computed")
        preprocess_params = {"is_split_into_words": is_split_into_words,
                             "delimiter": " " if delimiter is None else delimiter}
        postprocess_params = {}
        if aggregation_strategy is not None:
            if isinstance(aggregation_strategy, str):
                aggregation_strategy = AggregationStrategy[aggregation_strategy.upper()]
            postprocess_params["aggregation_strategy"] = aggregation_strategy
        if ignore_labels is not None:
            postprocess_params["ignore_labels"] = ignore_labels
        return preprocess_params, {}, postprocess_params

    def preprocess(self, sentence, is_split_into_words=False, delimiter=" "):
        if is_split_into_words:
            if not isinstance(sentence, list):
                raise ValueError("When `is_split_into_words=True`, `sentence` must be a list of words.")
            words, offsets, start = list(sentence), [], 0
            for word in words:
                offsets.append((start, start + len(word)))
                start += len(word) + len(delimiter)
            sentence = delimiter.join(words)
        else:
            if not isinstance(sentence, str):
                raise ValueError("When `is_split_into_words=False`, `sentence` must be an untokenized string.")
            matches = list(re.finditer(r"\S+", sentence))
            words = [m.group() for m in matches]
            offsets = [m.span() for m in matches]
        inputs = self.tokenizer(words, is_split_into_words=True, return_tensors="pt")
        yield {**inputs, "sentence": sentence, "words": words, "word_offsets": offsets, "is_last": True}

    def _forward(self, model_inputs):
        extras = {key: model_inputs.pop(key) for key in ("sentence", "words", "word_offsets", "is_last")}
        if not extras["words"]:
            return {"logits": torch.zeros(1, 0, len(self.model.config.id2label)), **extras}
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
                {"word": word, "scores": word_scores, "start": start, "end": end, "index": index,
                 "is_subword": False}
                for index, (word, word_scores, (start, end)) in enumerate(
                    zip(output["words"], scores, output["word_offsets"]))
            ]
            entities += [
                entity for entity in self.aggregate(pre_entities, aggregation_strategy)
                if entity.get("entity", entity.get("entity_group")) not in ignore_labels
            ]
        return entities
