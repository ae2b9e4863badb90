#!/usr/bin/env python
"""What each layer of a frozen ELMo biLM knows: a linear probe per layer for POS tags and for NER tags.

Peters et al. (2018, section 5.3) find that the lower biLSTM layer predicts POS tags better and the top layer word
senses: lower layers carry syntax, higher ones semantics. This script measures it on CoNLL-2003:

    features   each biLM layer's word vectors, frozen: layer 0 the character layer, 1..L the biLSTM layers
               (forward and backward concatenated, as ELMo gives them), on a fixed sample of eng.train
    probe      a linear softmax classifier per layer and task (POS: CoNLL column 2; NER: column 4, as in the
               file), trained with Adam on standardised features, once per seed of the classifier
    score      token accuracy on a fixed sample of eng.testa, beside the majority-class baseline (the most
               frequent training tag for every word) and the same probe on a random biLM of the same shape
               (the control: what a linear classifier gets from random features of the characters and context)

    python examples/experiments/probe_elmo_layers.py --bilm runs/elmo/bilm --data_dir ../shared/data \
        --output_dir runs/probe

`--data_dir` holds `conll2003/` (eng.train, eng.testa). Writes to `--output_dir`: `results.md` (a table per task:
mean (min–max) over seeds and each seed), `results.json` (every seed's accuracy per task, biLM and layer, the
samples' sizes, the baselines) and `probe_accuracy.png` (accuracy against layer, a line per task and biLM).
"""

import json
import random
import statistics
from pathlib import Path

import numpy as np
import torch
from experiment_lib import markdown_table, pyplot, save_plot, seed_table, verdict
from transformers import AutoConfig

from hf_ctx.data.atomic_write import write_text
from hf_ctx.data.conll import read_conll
from hf_ctx.modeling_elmo import ElmoModel
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.embed import ElmoEmbedder, load_elmo
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.trainer import transformers_progress_bars_off

# Task name -> the `read_conll` column of its tags.
TASKS = {"POS": "pos_tags", "NER": "ner_tags"}
BILMS = ("pretrained biLM", "random biLM (control)")


def sample_sentences(path: Path, count: int, seed: int) -> list[dict]:
    """`count` sentences of a CoNLL file drawn at random with `seed` (all of them if it has fewer), in file order."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (--data_dir must hold conll2003/eng.train and eng.testa)")
    sentences = read_conll(path)
    if count < len(sentences):
        keep = sorted(random.Random(seed).sample(range(len(sentences)), count))
        sentences = [sentences[i] for i in keep]
    return sentences


@torch.no_grad()
def layer_features(model: ElmoModel, sentences: list[dict], batch_size: int) -> list[torch.Tensor]:
    """Every word's vector in each of the biLM's L + 1 layers: L + 1 tensors (words, 2P), words in sentence order."""
    embedder = ElmoEmbedder(model, device="cpu")
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]["tokens"]))  # little padding per batch
    vectors = [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        for i, array in zip(batch, embedder.embed_batch([sentences[i]["tokens"] for i in batch])):
            vectors[i] = array  # (L + 1, words, 2P)
    stacked = torch.from_numpy(np.concatenate(vectors, axis=1))  # (L + 1, all words, 2P)
    return list(stacked.unbind(0))


def random_bilm(bilm_dir: str, seed: int) -> ElmoModel:
    """A biLM of the shape of the one in `bilm_dir`, with the random weights of its initialisation (seeded)."""
    torch.manual_seed(seed)
    return ElmoModel(AutoConfig.from_pretrained(bilm_dir)).eval()


def train_probe(
    features: torch.Tensor, labels: torch.Tensor, num_classes: int, seed: int, epochs: int, batch_size: int = 256
):
    """A linear softmax classifier on `features` (N, D) for `labels` (N,) class ids, trained with Adam on features
    standardised with their own mean and deviation. Returns a function: features (M, D) -> predicted ids (M,)."""
    mean, scale = features.mean(0), features.std(0).clamp_min(1e-6)  # a constant feature (padding zeros) stays 0
    inputs = (features - mean) / scale
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    linear = torch.nn.Linear(features.shape[1], num_classes)
    optimizer = torch.optim.Adam(linear.parameters(), lr=1e-2, weight_decay=1e-5)
    for _ in range(epochs):
        for batch in torch.randperm(len(inputs), generator=generator).split(batch_size):
            loss = torch.nn.functional.cross_entropy(linear(inputs[batch]), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    @torch.no_grad()
    def predict(test_features: torch.Tensor) -> torch.Tensor:
        return linear((test_features - mean) / scale).argmax(-1)

    return predict


def tag_ids(train: list[dict], test: list[dict], column: str) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """The training tags (sorted) and both samples' words as ids of them; a test tag never seen in training is -1
    (no probe can predict it: it counts as an error)."""
    tags = sorted({tag for sentence in train for tag in sentence[column]})
    index = {tag: i for i, tag in enumerate(tags)}

    def ids(sentences):
        return torch.tensor([index.get(tag, -1) for sentence in sentences for tag in sentence[column]])

    return tags, ids(train), ids(test)


def majority_baseline(train_ids: torch.Tensor, test_ids: torch.Tensor, tags: list[str]) -> tuple[str, float]:
    """Token accuracy of tagging every test word with the most frequent training tag."""
    majority = int(torch.bincount(train_ids).argmax())
    return f"always {tags[majority]!r}", float((test_ids == majority).double().mean())


def probe_layers(train_layers, test_layers, train_ids, test_ids, num_classes, seeds, epochs) -> list[list[float]]:
    """Token accuracy of a probe per layer and seed: [layer][seed]."""
    return [
        [
            float((train_probe(train_x, train_ids, num_classes, seed, epochs)(test_x) == test_ids).double().mean())
            for seed in seeds
        ]
        for train_x, test_x in zip(train_layers, test_layers)
    ]


def layer_names(num_layers: int) -> list[str]:
    return ["layer 0 (characters)"] + [f"layer {k} (LSTM {k})" for k in range(1, num_layers)]


def best_layer(scores: list[list[float]]) -> int:
    """The layer whose probe has the highest mean accuracy over seeds."""
    return max(range(len(scores)), key=lambda k: statistics.mean(scores[k]))


def tables(results: dict) -> list[dict]:
    """A `seed_table` per task: every layer of both biLMs, the baseline, each layer against its control."""
    names = layer_names(results["num_layers"])
    found = []
    for task, column in TASKS.items():
        scores = results["accuracy"][task]
        found.append(
            seed_table(
                f"{task} tags ({column}): token accuracy on eng.testa",
                "token accuracy",
                {f"{name}, {bilm}": scores[bilm][k] for bilm in BILMS for k, name in enumerate(names)},
                results["seeds"],
                tuple(results["majority"][task]),
                [(f"{name}, {BILMS[0]}", f"{name}, {BILMS[1]}") for name in names],
            )
        )
    return found


def report(results: dict) -> str:
    """results.md: a table per task (`tables`), then each task's best layer of the pretrained biLM against every
    other layer."""
    seeds, names = results["seeds"], layer_names(results["num_layers"])
    sections = [
        f"## Linear probes of ELMo's layers (biLM {results['bilm']})\n\n"
        f"Probes trained on {results['train_words']:,} words ({results['train_sentences']:,} sentences of "
        f"eng.train), scored on {results['eval_words']:,} words ({results['eval_sentences']:,} sentences of "
        f"eng.testa); {results['epochs']} epochs of Adam per probe, seeds {', '.join(map(str, seeds))}.\n"
    ]
    for task, table in zip(TASKS, tables(results)):
        scores = results["accuracy"][task]
        table = markdown_table(table)
        best = results["best_layer"][task]
        against = [
            f"- {names[best]} vs {names[k]} (as the control): {verdict(scores[BILMS[0]][best], scores[BILMS[0]][k])}"
            for k in range(len(names))
            if k != best
        ]
        sections.append(
            table + f"\nBest layer of the pretrained biLM (mean): {names[best]}.\n\n" + "\n".join(against) + "\n"
        )
    pos, ner = results["best_layer"]["POS"], results["best_layer"]["NER"]
    relation = "below" if pos < ner else "the same as" if pos == ner else "above"
    sections.append(f"POS's best layer ({pos}) is {relation} NER's ({ner}) in the pretrained biLM.\n")
    return "\n".join(sections)


def plot(results: dict, png: Path) -> Path:
    """Accuracy against layer: a line per task and biLM (mean over seeds, min–max shaded), the baselines dotted."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 4))
    layers = list(range(results["num_layers"]))
    for task, colour in zip(TASKS, ("tab:blue", "tab:orange")):
        for bilm, style in zip(BILMS, ("-", "--")):
            scores = results["accuracy"][task][bilm]
            axis.plot(
                layers, [statistics.mean(s) for s in scores], style, marker="o", color=colour, label=f"{task}, {bilm}"
            )
            axis.fill_between(layers, [min(s) for s in scores], [max(s) for s in scores], color=colour, alpha=0.2)
        axis.axhline(results["majority"][task][1], color=colour, linestyle=":", label=f"{task}, majority class")
    axis.set_xticks(layers, ["chars (0)"] + [f"LSTM {k}" for k in layers[1:]])
    axis.set_xlabel("biLM layer")
    return save_plot(figure, axis, png, "Linear probe per ELMo layer (CoNLL-2003 eng.testa)", "token accuracy")


def parse_arguments(argv):
    parser = kinds.CheckedArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bilm",
        type=kinds.MODEL,
        required=True,
        help="an ELMo biLM checkpoint folder (pretrain_elmo.py, convert-elmo)",
    )
    parser.add_argument(
        "--data_dir",
        type=kinds.EXISTING_FOLDER,
        required=True,
        help="a folder with conll2003/eng.train and conll2003/eng.testa",
    )
    parser.add_argument("--output_dir", type=kinds.OUTPUT_FOLDER, required=True)
    parser.add_argument("--train_sentences", type=kinds.COUNT, default=3000, help="sentences of eng.train sampled")
    parser.add_argument("--eval_sentences", type=kinds.COUNT, default=1000, help="sentences of eng.testa sampled")
    parser.add_argument(
        "--sample_seed", type=kinds.SEED, default=0, help="seed of both samples and of the random biLM"
    )
    parser.add_argument("--seeds", type=kinds.SEED, nargs="+", default=[0, 1, 2], help="seeds of the probes")
    parser.add_argument("--epochs", type=kinds.COUNT, default=5, help="epochs of each probe's training")
    parser.add_argument("--batch_size", type=kinds.BATCH_SIZE, default=64, help="sentences per biLM batch")
    parser.add_argument("--num_threads", type=kinds.THREADS, default=1, help="CPU threads (torch.set_num_threads)")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_arguments(argv)
    torch.set_num_threads(args.num_threads)
    conll = Path(args.data_dir) / "conll2003"
    train = sample_sentences(conll / "eng.train", args.train_sentences, args.sample_seed)
    test = sample_sentences(conll / "eng.testa", args.eval_sentences, args.sample_seed)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    labels = {task: tag_ids(train, test, column) for task, column in TASKS.items()}
    accuracy = {task: {} for task in TASKS}
    for bilm in BILMS:
        if bilm == BILMS[0]:
            with transformers_progress_bars_off():  # a "Loading weights" bar for a load of a second: noise
                model = load_elmo(args.bilm).eval()
        else:
            model = random_bilm(args.bilm, args.sample_seed)
        train_layers = layer_features(model, train, args.batch_size)
        test_layers = layer_features(model, test, args.batch_size)
        for task, (tags, train_ids, test_ids) in labels.items():
            accuracy[task][bilm] = probe_layers(
                train_layers, test_layers, train_ids, test_ids, len(tags), args.seeds, args.epochs
            )
    results = {
        "bilm": args.bilm,
        "num_layers": len(train_layers),
        "train_sentences": len(train),
        "train_words": len(train_layers[0]),
        "eval_sentences": len(test),
        "eval_words": len(test_layers[0]),
        "epochs": args.epochs,
        "seeds": args.seeds,
        "majority": {task: majority_baseline(ids[1], ids[2], ids[0]) for task, ids in labels.items()},
        "accuracy": accuracy,  # task -> biLM -> [layer][seed]
        "best_layer": {task: best_layer(accuracy[task][BILMS[0]]) for task in TASKS},
    }
    results["tables"] = tables(results)  # as every experiment's results.json has them (render_results.py)
    write_text(out / "results.json", json.dumps(results, indent=2) + "\n")
    write_text(out / "results.md", report(results))
    plot(results, out / "probe_accuracy.png")
    print(report(results))
    return results


if __name__ == "__main__":
    run_script(main)
