#!/usr/bin/env python
"""Training epochs of a tagger on a frozen biLM with the biLM state cache: the first epoch (states computed and
cached, then the steps) against a later one (states read from the cache); an epoch without the cache for reference.

    python benchmarks/bilm_cache_speed.py --threads 1                  # TagLM and the ELMo tagger, small biLM

The sentences are the first `--sentences` of CoNLL-2003's eng.train (../shared/data; `--conll` for another file),
in batches of `--batch_size` (8, as `run_ner.py` trains TagLM), each step a forward, backward and AdamW update in
training mode, as `Trainer` runs it; random weights (the time does not depend on them). The disk cache is written
to a temporary folder and its size per word measured; the size per 100k words of every ELMo size is computed from
the dims: (L + 1) layers x 2P floats x 4 bytes per word.
"""

import argparse
import os
import tempfile
import time

import torch
from transformers import DataCollatorWithPadding

from hf_ctx import (
    ELMO_PRESETS,
    ElmoConfig,
    ElmoForBiLM,
    ElmoForTokenClassification,
    ElmoTokenizer,
    TagLMConfig,
    TagLMForTokenClassification,
)
from hf_ctx.data.bilm_cache import STORAGE_DTYPE, BiLMStateCache, BiLMStatesCollator, sentence_key
from hf_ctx.data.conll import read_conll
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script

DEFAULT_CONLL = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "conll2003", "eng.train")
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]


def build_models(size: str, tokenizer: ElmoTokenizer) -> dict:
    torch.manual_seed(0)
    labels = {"id2label": dict(enumerate(LABELS)), "label2id": {t: i for i, t in enumerate(LABELS)}}
    bilm_config = ElmoConfig.from_preset(size, vocab_size=tokenizer.vocab_size)
    bilm = ElmoForBiLM(bilm_config).elmo
    taglm = TagLMForTokenClassification.from_bilm(bilm, TagLMConfig(vocab_size=tokenizer.vocab_size, **labels))
    elmo = ElmoForTokenClassification(ElmoConfig.from_preset(size, vocab_size=tokenizer.vocab_size, **labels))
    elmo.elmo.load_state_dict(bilm.state_dict())
    return {"TagLM + biLM": taglm, "ELMo tagger": elmo}


def epoch(model, batches: list[list[dict]], collator) -> float:
    """Seconds for one training epoch over `batches` (collating included)."""
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    model.train()
    start = time.perf_counter()
    for features in batches:
        batch = collator(features)
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return time.perf_counter() - start


def main(argv=None):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conll", type=kinds.EXISTING_FILE, default=DEFAULT_CONLL)
    parser.add_argument("--sentences", type=kinds.COUNT, default=64)
    parser.add_argument("--batch_size", type=kinds.BATCH_SIZE, default=8)
    parser.add_argument("--size", type=kinds.TEXT, default="small", choices=list(ELMO_PRESETS))
    parser.add_argument("--threads", type=kinds.THREADS, default=None, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    sentences = [s for s in read_conll(args.conll) if s["tokens"]][: args.sentences]
    words = sorted({w for s in sentences for w in s["tokens"]})
    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", *words])
    label2id = {t: i for i, t in enumerate(LABELS)}
    features = []
    for s in sentences:
        encoded = dict(tokenizer(s["tokens"], is_split_into_words=True))
        encoded["labels"] = [label2id[t] for t in s["ner_tags"]]
        features.append(encoded)
    batches = [features[i : i + args.batch_size] for i in range(0, len(features), args.batch_size)]
    total_words = sum(len(s["tokens"]) for s in sentences)
    print(
        f"{len(sentences)} sentences ({total_words} words) of {os.path.basename(args.conll)}, batches of "
        f"{args.batch_size}, {args.size} biLM, {torch.get_num_threads()} thread(s)"
    )

    plain = DataCollatorWithPadding(tokenizer)
    measured_bytes = None
    for name, model in build_models(args.size, tokenizer).items():
        without = epoch(model, batches, plain)
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            cache = BiLMStateCache(model.frozen_bilm(), tokenizer, "disk", folder)
            cache.compute(features, progress=False)
            collator = BiLMStatesCollator(plain, cache)
            first = time.perf_counter() - start + epoch(model, batches, collator)
            later = epoch(model, batches, collator)
            measured_bytes = sum(p.stat().st_size for p in cache.folder.glob("*.safetensors"))
        print(
            f"{name:14s} epoch without cache {without:7.2f} s | first epoch (states computed) {first:7.2f} s | "
            f"later epoch {later:6.2f} s | first / later {first / later:5.1f}x | without / later "
            f"{without / later:5.1f}x"
        )

    config = ElmoConfig.from_preset(args.size, vocab_size=tokenizer.vocab_size)
    per_word = config.num_output_layers * config.hidden_size * torch.finfo(STORAGE_DTYPE).bits // 8
    stored_words = sum(dict(sentence_key(f["input_ids"]) for f in features).values())  # each sentence once
    print(
        f"cache file(s) for {stored_words} words (repeated sentences stored once): {measured_bytes:,} bytes = "
        f"{measured_bytes / stored_words:,.0f} bytes a word (from the dims: {per_word:,}; the rest is the header)"
    )
    for size in ELMO_PRESETS:
        config = ElmoConfig.from_preset(size, vocab_size=10)
        per_word = config.num_output_layers * config.hidden_size * torch.finfo(STORAGE_DTYPE).bits // 8
        print(
            f"  {size:8s} biLM ({config.num_output_layers} layers x {config.hidden_size}): "
            f"{per_word:,} bytes a word, {per_word * 100_000 / 1e6:,.0f} MB per 100k words"
        )


if __name__ == "__main__":
    run_script(main)
