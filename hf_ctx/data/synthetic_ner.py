"""A small, deterministic NER corpus in CoNLL-2003 format, plus raw text, for the end-to-end example and tests.

Sentences come from news-like templates whose slots are filled with person, organisation, location and
miscellaneous names. Two properties make it a fair miniature of the TagLM setting:
- the tagged splits are written in IOB1, as CoNLL-2003 is released, so readers must detect and convert;
- validation and test use names the tagged training split never contains, while the raw text (for biLM
  pretraining) uses all names, so a biLM trained on it knows in which contexts they occur, which is what
  TagLM's semi-supervision exploits. Some names are ambiguous (e.g. "Jordan" is a person or a location)
  and only their context decides.

Same seed, same files: `generate_ner_corpus(out_dir)` writes train.txt, validation.txt, test.txt (4 columns)
and raw.txt (one sentence per line). Run it as `python -m hf_ctx.data.synthetic_ner OUT_DIR`.
"""

import argparse
import random
from pathlib import Path

from ..tag_schemes import TAG_SCHEMES, convert_tags
from .atomic_write import atomic_write
from .files import how_generated, mark_generated

FIRST_NAMES = [
    "John",
    "Mary",
    "Peter",
    "Anna",
    "David",
    "Maria",
    "Michael",
    "Elena",
    "Thomas",
    "Sofia",
    "Paul",
    "Laura",
    "Mark",
    "Julia",
    "Robert",
    "Nadia",
    "James",
    "Olga",
    "Carlos",
    "Yuki",
    "Ahmed",
    "Ingrid",
    "Pierre",
    "Chen",
    "Kofi",
    "Lars",
    "Rafael",
    "Aisha",
    "Stefan",
    "Priya",
]
LAST_NAMES = [
    "Smith",
    "Jordan",
    "Muller",
    "Rossi",
    "Tanaka",
    "Novak",
    "Garcia",
    "Kowalski",
    "Berg",
    "Dubois",
    "Silva",
    "Ivanov",
    "Khan",
    "Okafor",
    "Larsen",
    "Moreau",
    "Weber",
    "Costa",
    "Nakamura",
    "Petrov",
    "Schmidt",
    "Martin",
    "Lopez",
    "Fischer",
    "Hansen",
    "Ali",
    "Mensah",
    "Romano",
    "Lindqvist",
    "Sato",
]
LOCATIONS = [
    "London",
    "Paris",
    "Berlin",
    "Madrid",
    "Rome",
    "Moscow",
    "Tokyo",
    "Beijing",
    "Cairo",
    "Lagos",
    "Sydney",
    "Toronto",
    "Chicago",
    "Boston",
    "Vienna",
    "Prague",
    "Warsaw",
    "Oslo",
    "Lisbon",
    "Athens",
    "Jordan",
    "Germany",
    "France",
    "Brazil",
    "Kenya",
    "India",
    "Japan",
    "Canada",
    "Norway",
    "Egypt",
    "New York",
    "South Africa",
    "Hong Kong",
    "Buenos Aires",
    "New Zealand",
    "Sao Paulo",
]
ORG_HEADS = [
    "Apex",
    "Nordic",
    "Atlas",
    "Vertex",
    "Orion",
    "Summit",
    "Pioneer",
    "Harbor",
    "Crescent",
    "Granite",
    "Meridian",
    "Falcon",
    "Sterling",
    "Cobalt",
    "Beacon",
    "Evergreen",
    "Jordan",
    "Lincoln",
]
ORG_TAILS = ["Corp", "Bank", "Airlines", "Motors", "Group", "Holdings", "Energy", "Telecom", "Foods", "Steel"]
ORGS_FIXED = [
    "United Nations",
    "European Union",
    "Reuters",
    "NATO",
    "OPEC",
    "Real Madrid",
    "Ajax",
    "Bayern Munich",
    "Red Cross",
    "World Bank",
    "IMF",
    "Chelsea",
    "Juventus",
    "Interpol",
]
MISC = [
    "German",
    "French",
    "British",
    "Japanese",
    "Brazilian",
    "Olympic Games",
    "World Cup",
    "Euro",
    "Nobel Prize",
    "Islamic",
    "Christian",
    "Russian",
    "Chinese",
    "Kenyan",
    "Tour de France",
    "Grand Prix",
    "Canadian",
    "Norwegian",
    "Egyptian",
    "Indian",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# {PER}, {ORG}, {LOC}, {MISC} are entity slots; {NUM} and {DAY} are filled with plain words (tag O).
TEMPLATES = [
    "{PER} , who works for {ORG} , arrived in {LOC} on {DAY} .",
    "{ORG} shares rose {NUM} percent in {LOC} trading on {DAY} .",
    "{PER} said the {MISC} team would play in {LOC} next week .",
    "The {ORG} chairman {PER} met {PER} in {LOC} .",
    "{LOC} beat {LOC} {NUM} - {NUM} in the {MISC} qualifier .",
    "Police in {LOC} said {NUM} people were hurt on {DAY} .",
    "{PER} ( {LOC} ) beat {PER} ( {LOC} ) {NUM} - {NUM} .",
    "{ORG} said on {DAY} it would cut {NUM} jobs in {LOC} .",
    "The {MISC} government asked {ORG} to send aid to {LOC} .",
    "{PER} of {ORG} told {ORG} that prices in {LOC} were falling .",
    "Winners : {PER} {PER} .",
    "{ORG} {ORG} talks ended in {LOC} without a deal .",
    "{MISC} officials said {PER} would visit {LOC} and {LOC} .",
    "Striker {PER} scored twice as {ORG} beat {ORG} {NUM} - {NUM} .",
    "{PER} , a {MISC} citizen , was born in {LOC} .",
    "Analysts at {ORG} expect growth of {NUM} percent in {LOC} .",
    "The {MISC} will be held in {LOC} , {ORG} officials said .",
    "{PER} won the {MISC} after a close race in {LOC} .",
    "Talks between {ORG} and {ORG} resumed in {LOC} on {DAY} .",
    "{PER} told reporters in {LOC} that {ORG} would not comment .",
    "Rain stopped play in {LOC} on {DAY} .",
    "Prices fell for the {NUM} day in a row .",
]

POS = {
    ".": ".",
    ",": ",",
    "(": "(",
    ")": ")",
    "-": ":",
    ":": ":",
    "the": "DT",
    "The": "DT",
    "a": "DT",
    "in": "IN",
    "on": "IN",
    "of": "IN",
    "for": "IN",
    "at": "IN",
    "after": "IN",
    "to": "TO",
    "and": "CC",
    "said": "VBD",
    "told": "VBD",
    "beat": "VBD",
    "met": "VBD",
    "won": "VBD",
    "rose": "VBD",
    "fell": "VBD",
    "would": "MD",
    "who": "WP",
    "that": "IN",
    "were": "VBD",
    "was": "VBD",
    "it": "PRP",
}


def _person(rng, names):
    first, last = names
    return rng.choice(first).split() + rng.choice(last).split() if rng.random() < 0.7 else rng.choice(last).split()


def _organisation(rng, names):
    heads, fixed = names
    if rng.random() < 0.5:
        return [rng.choice(heads), rng.choice(ORG_TAILS)]
    return rng.choice(fixed).split()


def _split_names(seed):
    """Each name list split into (seen, held out): held-out names never occur in the tagged training split."""
    rng = random.Random(seed)

    def split(names):
        names = sorted(names)
        rng.shuffle(names)
        cut = int(len(names) * 0.7)
        return names[:cut], names[cut:]

    first, last, locations, heads, fixed, misc = map(
        split, (FIRST_NAMES, LAST_NAMES, LOCATIONS, ORG_HEADS, ORGS_FIXED, MISC)
    )
    seen = {"PER": (first[0], last[0]), "ORG": (heads[0], fixed[0]), "LOC": locations[0], "MISC": misc[0]}
    held_out = {"PER": (first[1], last[1]), "ORG": (heads[1], fixed[1]), "LOC": locations[1], "MISC": misc[1]}
    return seen, held_out


def _sentence(rng, names) -> tuple[list[str], list[str]]:
    """One sentence as (words, IOB2 tags)."""
    words, tags = [], []
    for piece in rng.choice(TEMPLATES).split():
        if piece in ("{PER}", "{ORG}", "{LOC}", "{MISC}"):
            kind = piece[1:-1]
            if kind == "PER":
                entity = _person(rng, names["PER"])
            elif kind == "ORG":
                entity = _organisation(rng, names["ORG"])
            else:
                entity = rng.choice(names[kind]).split()
            words += entity
            tags += [f"B-{kind}"] + [f"I-{kind}"] * (len(entity) - 1)
        elif piece == "{NUM}":
            words.append(str(rng.randint(1, 99)))
            tags.append("O")
        elif piece == "{DAY}":
            words.append(rng.choice(DAYS))
            tags.append("O")
        else:
            words.append(piece)
            tags.append("O")
    return words, tags


def _pos_and_chunk(words, tags):
    pos = [
        POS.get(w, "CD" if w.isdigit() else "NNP" if t != "O" or w[0].isupper() else "NN") for w, t in zip(words, tags)
    ]
    chunk = [
        "O" if p in (".", ",", "(", ")", ":") else "I-VP" if p.startswith("V") or p == "MD" else "I-NP" for p in pos
    ]
    return pos, chunk


def _write_tagged(path: Path, sentences, scheme: str):
    with atomic_write(path) as f:
        f.write("-DOCSTART- -X- -X- O\n\n")
        for words, tags in sentences:
            tags = convert_tags(tags, "IOB2", scheme)
            pos, chunk = _pos_and_chunk(words, tags)
            for row in zip(words, pos, chunk, tags):
                f.write(" ".join(row) + "\n")
            f.write("\n")


_GENERATED_BY = "generated by hf_ctx.data.synthetic_ner"


def generate_ner_corpus(
    output_dir: str | Path,
    num_train: int = 1500,
    num_validation: int = 300,
    num_test: int = 300,
    num_raw: int = 6000,
    seed: int = 0,
    scheme: str = "IOB1",
) -> dict[str, Path]:
    """Write the corpus to `output_dir`; returns {"train", "validation", "test", "raw"} -> path.

    Args:
        num_train / num_validation / num_test: tagged sentences per split.
        num_raw: untagged sentences (all names, seen and held out) for language-model pretraining.
        seed: the same seed writes the same files.
        scheme: tags of the tagged files: "IOB1" (as CoNLL-2003 is released), "IOB2", "BIOES" or "BIOUL".
    """
    sizes = {"num_train": num_train, "num_validation": num_validation, "num_test": num_test, "num_raw": num_raw}
    for name, size in sizes.items():  # 0 or -5 would write an empty split
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"{name} must be a whole number of sentences, at least 1, got {size!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be a whole number in [0, 2**32), as every hf_ctx seed, got {seed!r}")
    if scheme not in TAG_SCHEMES:
        raise ValueError(f"scheme must be one of {TAG_SCHEMES}, got {scheme!r}")
    output_dir = Path(output_dir)
    for name in ("train.txt", "validation.txt", "test.txt", "raw.txt"):  # a user's own data is never replaced,
        path = output_dir / name  # an earlier generated corpus is
        if path.exists() and not (how_generated(path) or "").startswith(_GENERATED_BY):
            raise FileExistsError(
                f"{path} exists and is not a corpus synthetic_ner generated: writing here would replace it; "
                "choose another folder"
            )
    output_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    seen, held_out = _split_names(seed)
    everything = {
        k: (
            tuple(a + b for a, b in zip(seen[k], held_out[k])) if isinstance(seen[k], tuple) else seen[k] + held_out[k]
        )
        for k in seen
    }
    # Evaluation sentences mix held-out and seen names, as real test sets do.
    evaluation = {
        k: (
            tuple(h + s[: len(h)] for h, s in zip(held_out[k], seen[k]))
            if isinstance(held_out[k], tuple)
            else held_out[k] + seen[k][: len(held_out[k])]
        )
        for k in seen
    }
    paths = {}
    for split, count, names in [
        ("train", num_train, seen),
        ("validation", num_validation, evaluation),
        ("test", num_test, evaluation),
    ]:
        paths[split] = output_dir / f"{split}.txt"
        _write_tagged(paths[split], [_sentence(rng, names) for _ in range(count)], scheme)
    paths["raw"] = output_dir / "raw.txt"
    with atomic_write(paths["raw"]) as f:
        for _ in range(num_raw):
            f.write(" ".join(_sentence(rng, everything)[0]) + "\n")
    for path in paths.values():
        mark_generated(path, f"{_GENERATED_BY} (seed {seed})")
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir")
    parser.add_argument("--num_train", type=int, default=1500)
    parser.add_argument("--num_validation", type=int, default=300)
    parser.add_argument("--num_test", type=int, default=300)
    parser.add_argument("--num_raw", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scheme", default="IOB1", choices=TAG_SCHEMES)
    args = parser.parse_args(argv)
    try:
        paths = generate_ner_corpus(
            args.output_dir, args.num_train, args.num_validation, args.num_test, args.num_raw, args.seed, args.scheme
        )
    except ValueError as error:  # the arguments, checked before anything is written: name the option
        parser.error(f"--{error}")
    except FileExistsError as error:
        parser.error(str(error))
    for split, path in paths.items():
        print(f"{split}: {path}")


if __name__ == "__main__":
    main()
