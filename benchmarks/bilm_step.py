#!/usr/bin/env python
"""One training step of the ELMo biLM (`ElmoForBiLM`: forward, backward, AdamW step) against its lower bound, the
same step of two `nn.LSTM(proj_size=...)` stacks alone (forward and backward direction, the biLM's sizes, the same
batch), in one process; then each part's forward + backward in isolation. With `--sentences`, also the words a
CPU second of the pretraining step reads, against another revision's biLM (`--baseline`).

    python benchmarks/bilm_step.py                                   # small preset, 1 thread, 32 x 40 words
    python benchmarks/bilm_step.py --config_overrides '{"char_cnn": {"filters": [[1, 32], [2, 64], [3, 128],
        [4, 128], [5, 160]]}, "lstm": {"dim": 256}}'
    # words/s of the experiments' biLM on Wikipedia sentences, against the biLM of git revision main
    python benchmarks/bilm_step.py --sentences ../shared/data/wiki/wiki.train.0.txt.gz --baseline main
        --vocab_size 80000 --no_parts --config_overrides '{"char_cnn": {"filters": [[1, 32],
        [2, 32], [3, 64], [4, 128], [5, 256]], "n_highway": 1}, "lstm": {"dim": 256, "projection_dim": 128}}'

The batch looks like text: `--batch_size` sentences of `--words` words drawn from a vocabulary of `--vocab_size`
random lowercase words with Zipf frequencies (p(k) ~ 1 / (k + 1), ids sorted by frequency as bilm-tf's are), so
frequent words repeat within a batch as they do in real sentences; `ElmoTokenizer` gives the character and word
ids. The model trains with dropout and the sampled softmax (`--num_sampled`). Times are medians of `--repeats`
steps after `--warmup` steps. `--text FILE` takes the first sentences (lines) of a text file instead. The ratio
printed is biLM step / lower bound (the issue's goal: <= 2).

`--sentences FILE` reads the first `--lines` lines of a text file (plain or .gz) into sentences of at most
`--words` words as `examples/pretrain_elmo.py` splits them (`hf_ctx.data.bilm.sentences_of`: CoNLL-style words),
with a vocabulary of their words by frequency (filled up to `--vocab_size` with random words), draws `--batches`
batches of `--batch_size` sentences at random, as `Trainer` does, and times the step `Trainer` runs with its
default arguments: the data collator (`BiLMDataCollator`, the tokenizer), forward, backward, gradients clipped to
norm 1, AdamW step (fused: `adamw_torch_fused`), gradients set to None. Words/s is words over the process's CPU
seconds (one thread: the pretraining budget of the experiments, `--max_train_cpu_minutes`), summed over
`--repeats` rounds of all batches; wall seconds too. With `--baseline REV` the biLM as it is at git revision REV
(its model modules loaded as a package of their own, `op_counts.modules_from_revision`) gets the same weights and
runs the same batches with the same random draws (dropout, sampled words), alternating with the current one step
by step; the script prints both rates, their ratio, and the largest difference of loss and gradients of the
first batch.
"""

import argparse
import gzip
import importlib
import itertools
import json
import random
import string
import time
from collections import Counter

import torch
from op_counts import modules_from_revision, step_seconds  # benchmarks/ is on the path of a script run from it
from torch import nn

from hf_ctx import ELMO_PRESETS, ElmoConfig, ElmoForBiLM, ElmoTokenizer
from hf_ctx.data.bilm import BiLMDataCollator, sentences_of
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script


def random_vocabulary(size: int, seed: int = 0) -> list[str]:
    """`size` distinct random lowercase words of 2 to 12 letters, after `<S>`, `</S>`, `<UNK>`."""
    rng = random.Random(seed)
    words = {}
    while len(words) < size - 3:
        words["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 12)))] = None
    return ["<S>", "</S>", "<UNK>", *words]


def text_batch(tokenizer: ElmoTokenizer, vocabulary: list[str], sentences: int, words: int, seed: int = 0) -> dict:
    """`sentences` sentences of `words` Zipf-distributed words, tokenized: input_ids, attention_mask,
    input_word_ids."""
    rng = random.Random(seed)
    weights = [1.0 / (k + 1) for k in range(len(vocabulary) - 3)]
    batch = [rng.choices(vocabulary[3:], weights=weights, k=words) for _ in range(sentences)]
    encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
    return {key: encoded[key] for key in ("input_ids", "attention_mask", "input_word_ids")}


def open_text(path: str):
    return (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8")


def text_vocabulary(counts: Counter, size: int) -> list[str]:
    """`<S>`, `</S>`, `<UNK>`, the counted words by frequency, filled up to `size` with random words."""
    known = [word for word, _ in counts.most_common()]
    filler = [word for word in random_vocabulary(size)[3:] if word not in counts]
    return ["<S>", "</S>", "<UNK>", *known, *filler][:size]


def text_file_batch(path: str, vocabulary_size: int, sentences: int, words: int) -> tuple[list[str], dict]:
    """The first `sentences` non-empty lines of a text file (words split at spaces, cut at `words`), tokenized
    with a vocabulary of their words by frequency filled up to `vocabulary_size` with random words."""
    with open_text(path) as text:
        batch = [line.split()[:words] for line in text if line.split()][:sentences]
    vocabulary = text_vocabulary(Counter(word for sentence in batch for word in sentence), vocabulary_size)
    encoded = ElmoTokenizer(vocab=vocabulary)(batch, is_split_into_words=True, padding=True, return_tensors="pt")
    return vocabulary, {key: encoded[key] for key in ("input_ids", "attention_mask", "input_word_ids")}


def sentence_batches(
    path: str, vocabulary_size: int, batch_size: int, max_words: int, lines: int, batches: int
) -> tuple[list[str], list[list[dict]]]:
    """(vocabulary, `batches` lists of `batch_size` {"words"} examples drawn at random from the sentences of the
    first `lines` lines of a text file, split as `pretrain_elmo.py` splits them)."""
    with open_text(path) as text:
        sentences = [sentence for line in itertools.islice(text, lines) for sentence in sentences_of(line, max_words)]
    vocabulary = text_vocabulary(Counter(word for sentence in sentences for word in sentence), vocabulary_size)
    rng = random.Random(0)
    return vocabulary, [[{"words": words} for words in rng.sample(sentences, batch_size)] for _ in range(batches)]


def median_seconds(step, repeats: int, warmup: int) -> float:
    """`op_counts.step_seconds` after `warmup` untimed calls."""
    for _ in range(warmup):
        step()
    return step_seconds(step, repeats)


def training_step(model: nn.Module, optimizer, loss_of):
    """A closure running forward, backward and the optimizer step; `loss_of()` returns the scalar loss."""

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_of().backward()
        optimizer.step()

    return step


def lstm_lower_bound(config: ElmoConfig, batch: int, steps: int):
    """The two LSTM stacks of the biLM alone: `nn.LSTM`s with projection, one per direction, and their input."""
    lstm = config.lstm
    stacks = nn.ModuleList(
        nn.LSTM(
            lstm["projection_dim"],
            lstm["dim"],
            num_layers=lstm["n_layers"],
            proj_size=lstm["projection_dim"],
            batch_first=True,
        )
        for _ in range(2)
    )
    inputs = torch.randn(batch, steps, lstm["projection_dim"])
    return stacks, inputs


def part_times(model: ElmoForBiLM, batch: dict, repeats: int, warmup: int) -> list[tuple[str, float]]:
    """Forward + backward of each part alone, on the inputs it sees in the step: (name, seconds)."""
    elmo = model.elmo
    mask = batch["attention_mask"].bool()
    with torch.no_grad():
        layers, mask_with_boundaries = elmo.bilm_layers(batch["input_ids"], mask)
    words = batch["input_ids"].shape[1]
    chars = batch["input_ids"].new_zeros(mask.shape[0], words + 2, batch["input_ids"].shape[-1])
    chars[:, 1 : words + 1] = batch["input_ids"]
    chars[:, 0] = elmo.boundary_char_ids[0]
    chars[torch.arange(mask.shape[0]), mask.sum(1) + 1] = elmo.boundary_char_ids[1]
    tokens = layers[0][..., : model.config.projection_dim].detach().requires_grad_(True)
    size = model.config.projection_dim
    states = layers[-1][:, :-1, :size].reshape(-1, size).detach().requires_grad_(True)
    targets = model._targets(batch["input_word_ids"], mask)[:, 1:].masked_fill(~mask_with_boundaries[:, 1:], -100)

    def backward(value):
        def run():
            model.zero_grad(set_to_none=True)
            value().sum().backward()

        return run

    parts = [
        (
            "character layer (CNN, highway, projection)",
            backward(lambda: elmo.token_embeddings(chars, mask_with_boundaries)),
        ),
        (
            "biLSTM stack (ProjectedLstm, clipped)",
            backward(lambda: sum(o.sum() for o in elmo.encoder(tokens, mask_with_boundaries))),
        ),
        ("sampled softmax loss x 2 directions", backward(lambda: 2 * model.softmax.loss(states, targets.reshape(-1)))),
    ]
    return [(name, median_seconds(run, repeats, warmup)) for name, run in parts]


def optimizer_times(model: ElmoForBiLM, batch: dict, repeats: int, warmup: int) -> list[tuple[str, float]]:
    """`optimizer.step()` alone over all parameters, with the gradients of one step: torch's default AdamW (one
    parameter at a time on CPU, as the benchmark's step and `Trainer`'s "adamw_torch" run it) and its fused
    kernel ("adamw_torch_fused")."""
    model.zero_grad(set_to_none=True)
    model(**batch).loss.backward()
    times = []
    for name, fused in (("AdamW step (default)", None), ("AdamW step (fused=True)", True)):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused)
        times.append((name, median_seconds(optimizer.step, repeats, warmup)))
    return times


def bilm_of_revision(revision: str, model: ElmoForBiLM) -> nn.Module:
    """`ElmoForBiLM` as it is at git `revision`, with `model`'s config and weights, in the same mode."""
    package = modules_from_revision(revision)
    configuration = importlib.import_module(f"{package}.configuration_elmo")
    modeling = importlib.import_module(f"{package}.modeling_elmo")
    baseline = modeling.ElmoForBiLM(configuration.ElmoConfig.from_dict(model.config.to_dict()))
    baseline.load_state_dict(model.state_dict())
    return baseline.train(model.training)


def pretraining_step(model: nn.Module, optimizer, collator):
    """What `Trainer` runs for a batch with its default arguments (`max_grad_norm=1`), as a function of the
    batch's examples that returns the number of words read."""

    def step(examples: list[dict]) -> int:
        batch = collator(examples)
        model(**batch).loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return int(batch["attention_mask"].sum())

    return step


def largest_differences(models: list[nn.Module], batch: dict) -> tuple[float, float]:
    """(loss, gradient): the largest differences between the models' losses and parameter gradients on `batch`,
    each after the same seed (same dropout and sampled words)."""
    results = []
    for model in models:
        torch.manual_seed(0)
        model.zero_grad(set_to_none=True)
        loss = model(**batch).loss
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        model.zero_grad(set_to_none=True)
    (loss, gradients), *others = results
    return (
        max(float((other - loss).abs()) for other, _ in others),
        max(float((o - g).abs().max()) for _, other in others for o, g in zip(other, gradients)),
    )


def words_per_second(steps: dict, batches: list[list[dict]], repeats: int, warmup: int) -> dict[str, tuple]:
    """{name: (words, CPU seconds, wall seconds)} of `steps` (name -> `pretraining_step`) over `repeats` rounds
    of `batches`, alternating the steps batch by batch (the order reversed every other time) after `warmup`
    untimed batches each. Each step of a batch starts from the same seed."""
    for index in range(warmup):
        for step in steps.values():
            step(batches[index % len(batches)])
    totals = {name: [0, 0.0, 0.0] for name in steps}
    for index, examples in enumerate(batches * repeats):
        names = list(steps) if index % 2 == 0 else list(steps)[::-1]
        for name in names:
            torch.manual_seed(index)
            cpu, wall = time.process_time(), time.perf_counter()
            totals[name][0] += steps[name](examples)
            totals[name][1] += time.process_time() - cpu
            totals[name][2] += time.perf_counter() - wall
    return {name: tuple(total) for name, total in totals.items()}


def print_words_per_second(model, tokenizer, batches, args):
    """The `--sentences` section: words/s of the pretraining step, against `--baseline`'s biLM if given."""
    models = {"current": model}
    if args.baseline:
        models[args.baseline] = bilm_of_revision(args.baseline, model)
        loss, gradient = largest_differences(list(models.values()), BiLMDataCollator(tokenizer)(batches[0]))
        print(
            f"\nlargest difference from {args.baseline} on the first batch: loss {loss:.2e}, gradients {gradient:.2e}"
        )
    steps = {
        name: pretraining_step(m, torch.optim.AdamW(m.parameters(), lr=1e-3, fused=True), BiLMDataCollator(tokenizer))
        for name, m in models.items()
    }
    totals = words_per_second(steps, batches, args.repeats, args.warmup)
    print(
        "\npretraining step (collator, forward, backward, clipping, fused AdamW), "
        f"{len(batches)} batches x {args.repeats}"
    )
    print(f"{'biLM':20s} {'words':>8s} {'CPU s':>8s} {'words/s':>8s} {'wall s':>8s} {'words/s':>8s}")
    for name, (words, cpu, wall) in totals.items():
        print(f"{name:20s} {words:8d} {cpu:8.1f} {words / cpu:8.0f} {wall:8.1f} {words / wall:8.0f}")
    if args.baseline:
        (_, cpu, wall), (_, base_cpu, base_wall) = totals["current"], totals[args.baseline]
        print(f"ratio current / {args.baseline}: {base_cpu / cpu:.2f} (CPU time), {base_wall / wall:.2f} (wall time)")


def main(argv=None):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_size", type=kinds.TEXT, default="small", choices=list(ELMO_PRESETS))
    parser.add_argument(
        "--config_overrides", type=kinds.TEXT, default=None, help="JSON of ElmoConfig fields over the preset"
    )
    parser.add_argument(
        "--vocab_size", type=kinds.VOCABULARY_SIZE, default=81_000, help="word vocabulary (softmax) size"
    )
    parser.add_argument(
        "--num_sampled",
        type=kinds.count_or_zero("the full softmax"),
        default=4096,
        help="sampled softmax size (0: full softmax)",
    )
    parser.add_argument("--batch_size", type=kinds.BATCH_SIZE, default=32, help="sentences per batch")
    parser.add_argument("--words", type=kinds.LENGTH, default=40, help="words per sentence")
    parser.add_argument(
        "--text",
        type=kinds.EXISTING_FILE,
        default=None,
        help="a text file: its first sentences (lines) instead of Zipf words",
    )
    parser.add_argument(
        "--sentences",
        type=kinds.EXISTING_FILE,
        default=None,
        help="a text file: words/s on random batches of its sentences",
    )
    parser.add_argument("--lines", type=kinds.COUNT, default=20_000, help="with --sentences: lines of the file read")
    parser.add_argument("--batches", type=kinds.COUNT, default=8, help="with --sentences: batches drawn")
    parser.add_argument(
        "--baseline", type=kinds.TEXT, default=None, help="with --sentences: git revision whose biLM to compare with"
    )
    parser.add_argument("--threads", type=kinds.THREADS, default=1)
    parser.add_argument("--repeats", type=kinds.COUNT, default=5)
    parser.add_argument("--warmup", type=kinds.count_or_zero("no warm-up"), default=2)
    parser.add_argument("--no_parts", action="store_true", help="skip the per-part breakdown")
    parser.add_argument("--fused_adamw", action="store_true", help="AdamW(fused=True) in both steps")
    args = parser.parse_args(argv)
    if args.baseline and not args.sentences:
        parser.error("--baseline compares words/s, which --sentences measures: give --sentences FILE")

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    overrides = json.loads(args.config_overrides) if args.config_overrides else {}
    sentences = None
    if args.sentences:
        vocabulary, sentences = sentence_batches(
            args.sentences, args.vocab_size, args.batch_size, args.words, args.lines, args.batches
        )
        tokenizer = ElmoTokenizer(vocab=vocabulary)
        batch = BiLMDataCollator(tokenizer)(sentences[0])
    elif args.text:
        vocabulary, batch = text_file_batch(args.text, args.vocab_size, args.batch_size, args.words)
    else:
        vocabulary = random_vocabulary(args.vocab_size)
        batch = text_batch(ElmoTokenizer(vocab=vocabulary), vocabulary, args.batch_size, args.words)
    config = ElmoConfig.from_preset(
        args.model_size, vocab_size=len(vocabulary), num_sampled=args.num_sampled, **overrides
    )
    model = ElmoForBiLM(config).train()
    distinct = len(set(batch["input_word_ids"][batch["attention_mask"].bool()].tolist()))
    source = args.sentences or args.text
    print(
        f"CPU, {torch.get_num_threads()} thread(s); ELMo {args.model_size}{' + overrides' if overrides else ''}: "
        f"LSTM {config.lstm['n_layers']} x {config.lstm['dim']} cells, projection {config.projection_dim}, "
        f"{sum(c for _, c in config.char_cnn['filters'])} filters; vocabulary {len(vocabulary):,}, sampled "
        f"{args.num_sampled}; batch {args.batch_size} x {args.words} words{' of ' + source if source else ''}: "
        f"{int(batch['attention_mask'].sum())} words, {distinct} distinct"
    )

    fused = True if args.fused_adamw else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused)
    bilm = median_seconds(training_step(model, optimizer, lambda: model(**batch).loss), args.repeats, args.warmup)
    stacks, inputs = lstm_lower_bound(config, len(batch["attention_mask"]), batch["attention_mask"].shape[1] + 2)
    lstm_optimizer = torch.optim.AdamW(stacks.parameters(), lr=1e-3, fused=fused)
    bound = median_seconds(
        training_step(stacks, lstm_optimizer, lambda: sum(stack(inputs)[0].sum() for stack in stacks)),
        args.repeats,
        args.warmup,
    )
    print(f"{'training step (forward, backward, AdamW' + (' fused)' if fused else ')'):60s} {'seconds':>9s}")
    print(f"{'ElmoForBiLM':60s} {bilm:9.3f}")
    print(f"{'lower bound: 2 nn.LSTM(proj_size) stacks':60s} {bound:9.3f}")
    print(f"ratio biLM / lower bound: {bilm / bound:.2f}")
    if not args.no_parts:
        print(f"\n{'part, forward + backward alone':60s} {'seconds':>9s} {'share':>6s}")
        for name, seconds in part_times(model, batch, args.repeats, args.warmup):
            print(f"{name:60s} {seconds:9.3f} {seconds / bilm:6.0%}")
        for name, seconds in optimizer_times(model, batch, args.repeats, args.warmup):
            print(f"{name:60s} {seconds:9.3f} {seconds / bilm:6.0%}")
    if sentences is not None:
        print_words_per_second(model, tokenizer, sentences, args)


if __name__ == "__main__":
    run_script(main)
