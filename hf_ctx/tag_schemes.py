"""Named-entity tag schemes: parsing tags, the schemes' names, converting between them, and which tag may follow
which (the constraints a CRF decodes under).

A tag is `O` or `<prefix>-<type>`, e.g. `B-PER`. The schemes:
- IOB2 (also called BIO): every entity starts with `B-`, and `I-` continues it.
- IOB1 (CoNLL-2003 as released): `I-` may start an entity; `B-` only starts an entity that directly follows
  one of the same type.
- BIOES: `S-` is a one-word entity, `E-` ends a longer one.

The data modules (`data/conll.py`, `data/synthetic_ner.py`), TagLM's config and the CRF import it from here.
This module travels with a TagLM checkpoint's remote code; it imports only the standard library.
"""

# The schemes, by their canonical names; `convert_tags` converts between any two.
TAG_SCHEMES = ("IOB1", "IOB2", "BIOES")
# Other names a scheme goes by.
SCHEME_ALIASES = {"BIO": "IOB2"}
# Every name a user may give (e.g. `TagLMConfig.tag_scheme`).
SCHEME_NAMES = ("BIO", *TAG_SCHEMES)
# The tag prefixes each scheme uses.
SCHEME_PREFIXES = {"IOB1": "BI", "IOB2": "BI", "BIOES": "BIES"}


def canonical_scheme(name: str) -> str:
    """'BIO' -> 'IOB2'; the canonical names unchanged; a `ValueError` for anything else."""
    scheme = SCHEME_ALIASES.get(name, name)
    if scheme not in TAG_SCHEMES:
        raise ValueError(f"unknown tag scheme {name!r}; expected one of {SCHEME_NAMES}")
    return scheme


def split_tag(tag: str) -> tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', ''). Raises ValueError for anything else."""
    if tag == "O":
        return "O", ""
    prefix, sep, entity = tag.partition("-")
    if not sep or prefix not in ("B", "I", "E", "S") or not entity:
        raise ValueError(f"NER tag {tag!r} is neither 'O' nor '<B|I|E|S>-<type>'")
    return prefix, entity


def detect_tag_scheme(tag_sequences) -> str:
    """'BIOES' if E-/S- tags occur, 'IOB1' if some entity starts with I-, else 'IOB2'."""
    prefixes, inside_starts = set(), False
    for tags in tag_sequences:
        previous = "O"
        for tag in tags:
            prefix, entity = split_tag(tag)
            prefixes.add(prefix)
            if prefix == "I" and previous not in (f"B-{entity}", f"I-{entity}"):
                inside_starts = True
            previous = tag
    if prefixes & {"E", "S"}:
        return "BIOES"
    return "IOB1" if inside_starts else "IOB2"


def _to_iob2(tags: list[str], scheme: str) -> list[str]:
    """One sentence's tags from `scheme` to IOB2."""
    out, previous = [], "O"
    for tag in tags:
        prefix, entity = split_tag(tag)
        if scheme == "IOB1" and prefix == "I" and previous not in (f"B-{entity}", f"I-{entity}"):
            tag = f"B-{entity}"
        elif scheme == "BIOES" and prefix in ("S", "E"):
            tag = f"{'B' if prefix == 'S' else 'I'}-{entity}"
        out.append(tag)
        previous = tag
    return out


def _from_iob2(tags: list[str], scheme: str) -> list[str]:
    """One sentence's IOB2 tags to `scheme`."""
    out = []
    for i, tag in enumerate(tags):
        prefix, entity = split_tag(tag)
        previous = tags[i - 1] if i > 0 else "O"
        following = tags[i + 1] if i + 1 < len(tags) else "O"
        continues = following == f"I-{entity}"
        if scheme == "IOB1" and prefix == "B" and previous not in (f"B-{entity}", f"I-{entity}"):
            tag = f"I-{entity}"
        elif scheme == "BIOES" and prefix == "B" and not continues:
            tag = f"S-{entity}"
        elif scheme == "BIOES" and prefix == "I" and not continues:
            tag = f"E-{entity}"
        out.append(tag)
    return out


def convert_tags(tags: list[str], source: str, target: str) -> list[str]:
    """Convert one sentence's tags between the IOB1, IOB2 and BIOES schemes (entities stay the same)."""
    source, target = canonical_scheme(source), canonical_scheme(target)
    if source == target:
        return list(tags)
    return _from_iob2(_to_iob2(tags, source), target)


def sort_labels(labels) -> list[str]:
    """'O' first, then by entity type, then by prefix (B, I, E, S): a stable order for label ids."""
    order = {"O": 0, "B": 1, "I": 2, "E": 3, "S": 4}

    def key(tag):
        prefix, entity = split_tag(tag)
        return (prefix != "O", entity, order[prefix])

    return sorted(set(labels), key=key)


def scheme_labels(tags, scheme: str) -> list[str]:
    """'O' and every label `scheme` has for each entity type among `tags`, in `sort_labels` order.

    The labels of a tagger trained on `tags`: a dev or test set may use a prefix the training data never does
    for a type (training saw only `I-LOC`, the dev set has `B-LOC`), and is then still read.
    """
    prefixes = SCHEME_PREFIXES[canonical_scheme(scheme)]
    types = {entity for entity in (split_tag(tag)[1] for tag in tags) if entity}
    return sort_labels(["O", *(f"{prefix}-{entity}" for entity in types for prefix in prefixes)])


def _is_transition_allowed(scheme: str, from_prefix: str, from_entity: str, to_prefix: str, to_entity: str) -> bool:
    """Whether `from -> to` may occur in `scheme` (a canonical name); START and END are the sentence boundaries."""
    same = from_entity == to_entity
    if scheme == "IOB2":
        if from_prefix == "START":
            return to_prefix in ("O", "B")
        if to_prefix == "END":
            return from_prefix in ("O", "B", "I")
        # I-x continues an entity of type x; O and B-y may follow anything.
        return to_prefix in ("O", "B") or (to_prefix == "I" and from_prefix in ("B", "I") and same)
    if scheme == "IOB1":
        if from_prefix == "START":
            # B-x only separates two adjacent entities of the same type, so it never starts a sentence.
            return to_prefix in ("O", "I")
        if to_prefix == "END":
            return from_prefix in ("O", "B", "I")
        return to_prefix in ("O", "I") or (to_prefix == "B" and from_prefix in ("B", "I") and same)
    if scheme == "BIOES":
        if from_prefix == "START":
            return to_prefix in ("O", "B", "S")
        if to_prefix == "END":
            return from_prefix in ("O", "E", "S")
        if to_prefix in ("O", "B", "S"):
            return from_prefix in ("O", "E", "S")
        # I-x and E-x continue an open entity of type x.
        return from_prefix in ("B", "I") and same
    raise ValueError(f"unknown tag scheme {scheme!r}; expected one of {SCHEME_NAMES}")


def allowed_transitions(scheme: str, id2label: dict[int, str]) -> list[tuple[int, int]]:
    """The (from_id, to_id) pairs that `scheme` allows between the labels of `id2label`.

    Id `T` (= len(id2label)) stands for the start of the sentence and `T + 1` for its end, so the result also
    says which tags may begin and end a sentence. Labels are 'O' or '<prefix>-<type>'; the prefixes must belong
    to the scheme (B/I for BIO and IOB1, B/I/E/S for BIOES).
    """
    name, scheme = scheme, canonical_scheme(scheme)
    num_tags = len(id2label)
    parts = {}
    for tag_id, label in id2label.items():
        prefix, entity = split_tag(label)
        if prefix != "O" and prefix not in SCHEME_PREFIXES[scheme]:
            raise ValueError(f"label {label!r} (id {tag_id}) has prefix {prefix!r}, which {name} does not use")
        parts[int(tag_id)] = (prefix, entity)
    parts[num_tags] = ("START", "")
    parts[num_tags + 1] = ("END", "")
    return [
        (i, j)
        for i, (from_prefix, from_entity) in parts.items()
        if from_prefix != "END"
        for j, (to_prefix, to_entity) in parts.items()
        if to_prefix != "START" and _is_transition_allowed(scheme, from_prefix, from_entity, to_prefix, to_entity)
    ]
