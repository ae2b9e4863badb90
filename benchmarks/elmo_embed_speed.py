#!/usr/bin/env python
"""ELMo embedding throughput (words/s) with and without the token-embedding cache, in the same run.

    python benchmarks/elmo_embed_speed.py                                   # small and original, 100k words
    python benchmarks/elmo_embed_speed.py --sizes original --sample_batches 12   # a sample of the batches

The text is the first `--words` words (100,000) of a real corpus (default: WikiText-2's test split from
../shared/data, cut into sentences at "."; any file of whitespace-tokenised text works), embedded as
`hf-ctx embed` does it: sentences sorted by length, `--batch_size` at a time, every layer computed. The cache
holds the text's own vocabulary, as bilm-tf's `dump_token_embeddings` does for a test set; building it is timed
separately (a one-off cost per vocabulary).

Both ways run on each batch, one after the other, alternating which goes first, so that a machine shared with
other jobs slows both alike; the ratio of the summed times is the figure to read. `--sample_batches N` times N
batches spread evenly over the sorted order instead of all of them (for the original size on a slow CPU).
Weights are random (throughput does not depend on them). The largest difference between the two ways' vectors
is printed with the largest vector value: float32 rounding (the CNN runs on batches of other shapes when
the cache is built), about 1e-7 of the values.

On a CPU shared with other jobs, `--threads 1` avoids OpenMP threads waiting on each other (elementwise
kernels were 40x slower with 2 threads on 2 busy cores).
"""

import argparse
import os
import time

import torch

from hf_ctx import ElmoConfig, ElmoModel
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.embed import ElmoEmbedder, LayerOutput
from hf_ctx.tools.errors import run_script

DEFAULT_TEXT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "corpus", "wikitext-2.test.txt")


def read_text(path: str, words: int) -> list[list[str]]:
    """The first `words` words of `path` as sentences (lists of words), each ending at a "." word."""
    sentences, current, count = [], [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            for word in line.split():
                current.append(word)
                count += 1
                if word == "." or count == words:
                    sentences.append(current)
                    current = []
                if count == words:
                    return sentences
    return sentences + ([current] if current else [])


def main(argv=None):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--text",
        type=kinds.EXISTING_FILE,
        default=DEFAULT_TEXT,
        help="whitespace-tokenised text (default: WikiText-2 test)",
    )
    parser.add_argument("--words", type=kinds.COUNT, default=100_000)
    parser.add_argument(
        "--sizes", type=kinds.TEXT, nargs="+", default=["small", "original"], choices=["small", "medium", "original"]
    )
    parser.add_argument("--batch_size", type=kinds.BATCH_SIZE, default=64)
    parser.add_argument(
        "--sample_batches", type=kinds.COUNT, default=None, help="time only this many batches, spread evenly"
    )
    parser.add_argument("--threads", type=kinds.THREADS, default=None, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if not os.path.isfile(args.text):
        raise SystemExit(f"no text at {args.text}: pass --text FILE (whitespace-tokenised text)")

    sentences = read_text(args.text, args.words)
    vocabulary = sorted({word for sentence in sentences for word in sentence})
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]), reverse=True)
    batches = [
        [sentences[i] for i in order[start : start + args.batch_size]]
        for start in range(0, len(order), args.batch_size)
    ]
    if args.sample_batches and args.sample_batches < len(batches):
        step = len(batches) / args.sample_batches
        batches = [batches[int(k * step)] for k in range(args.sample_batches)]
    n_words = sum(len(sentence) for batch in batches for sentence in batch)
    print(
        f"text: {sum(map(len, sentences))} words, {len(sentences)} sentences, {len(vocabulary)} distinct words; "
        f"timing {len(batches)} batches of up to {args.batch_size} sentences ({n_words} words); "
        f"{torch.get_num_threads()} threads"
    )

    for size in args.sizes:
        torch.manual_seed(0)
        embedder = ElmoEmbedder(ElmoModel(ElmoConfig.from_preset(size)), device="cpu")
        model, every_layer = embedder.model, LayerOutput(embedder.num_layers, "all")
        start = time.perf_counter()
        model.cache_token_embeddings(vocabulary)
        build = time.perf_counter() - start
        cache = (model.token_cache_keys, model.token_cache_char_ids, model.token_cache_embeddings)
        embedder.embed_batch(batches[-1], every_layer)  # warm-up

        seconds = {False: 0.0, True: 0.0}
        largest_difference = largest_value = 0.0
        for index, batch in enumerate(batches):
            results = {}
            for cached in (False, True) if index % 2 == 0 else (True, False):
                model.token_cache_keys, model.token_cache_char_ids, model.token_cache_embeddings = (
                    cache if cached else (None, None, None)
                )
                start = time.perf_counter()
                results[cached] = embedder.embed_batch(batch, every_layer)
                seconds[cached] += time.perf_counter() - start
            largest_difference = max(
                largest_difference, max(float(abs(a - b).max()) for a, b in zip(results[False], results[True]))
            )
            largest_value = max(largest_value, max(float(abs(a).max()) for a in results[False]))
        plain, cached = n_words / seconds[False], n_words / seconds[True]
        print(
            f"{size:>8}: without cache {plain:8.0f} words/s | with cache {cached:8.0f} words/s | "
            f"ratio {cached / plain:.2f}x | cache of {len(vocabulary)} words built in {build:.1f} s | "
            f"largest difference {largest_difference:.1e} (largest |value| {largest_value:.1f})",
            flush=True,
        )


if __name__ == "__main__":
    run_script(main)
