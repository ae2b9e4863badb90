"""Named-entity tag schemes: parsing tags, the schemes' names, converting between them, which tag may follow
which (the constraints a CRF decodes under) and how each is scored.

A tag is `O` or `<prefix>-<type>`, e.g. `B-PER`. The schemes:
- IOB2 (also called BIO): every entity starts with `B-`, and `I-` continues it.
- IOB1 (CoNLL-2003 as released): `I-` may start an entity; `B-` only starts an entity that directly follows
  one of the same type.
- BIOES: `S-` is a one-word entity, `E-` ends a longer one.
- BIOUL (also called BILOU; AllenNLP's name): BIOES with `U-` (unit) for `S-` and `L-` (last) for `E-`.

Each scheme is one `TagScheme` record in `SCHEMES`: how it writes an entity, and how seqeval scores it. The
functions below (conversion, allowed transitions, labels, detection) are derived from the records, so adding a
scheme is adding a record. The data modules (`data/conll.py`, `data/synthetic_ner.py`), TagLM's config and the
CRF import it from here. This module travels with a TagLM checkpoint's remote code; it imports nothing.
"""

# Every prefix some scheme uses, in label order (`sort_labels`).
PREFIX_ORDER = "BIESLU"


class TagScheme:
    """How a scheme writes an entity: the prefix of a one-word entity (`single`), or of a longer one's `first`,
    `middle` and `last` words.

    Args:
        name: the canonical name; `aliases`: other names it goes by.
        first_after_same_type: the prefix an entity's first word takes instead when the entity directly follows
            one of the same type (IOB1's `B-`), or None.
        seqeval_scheme: the seqeval scheme class (`seqeval.scheme.<name>`) whose `mode="strict"` reading scores
            this scheme (only well-formed entities count); None keeps seqeval's default reading, conlleval's,
            which the CoNLL shared tasks scored IOB1 and IOB2 with.
    """

    def __init__(self, name, aliases, single, first, middle, last, first_after_same_type=None, seqeval_scheme=None):
        self.name, self.aliases = name, tuple(aliases)
        self.single, self.first, self.middle, self.last = single, first, middle, last
        self.first_after_same_type = first_after_same_type
        self.seqeval_scheme = seqeval_scheme
        used = {single, first, middle, last, first_after_same_type} - {None}
        self.prefixes = "".join(p for p in PREFIX_ORDER if p in used)
        # What the allowed transitions follow from:
        self.opens = {single, first}  # may start an entity after anything that lets one start
        self.continues = {middle, last}  # continue the entity of the word before
        self.only_after_same_type = {first_after_same_type} - self.opens - {None}
        self.left_open = {first, middle} | ({first_after_same_type} - {None})  # the entity may go on after these
        # Where the last word of an entity has its own prefix, an entity left open must be continued.
        self.must_close = last != middle


SCHEMES = {
    scheme.name: scheme
    for scheme in (
        TagScheme("IOB1", (), single="I", first="I", middle="I", last="I", first_after_same_type="B"),
        TagScheme("IOB2", ("BIO",), single="B", first="B", middle="I", last="I"),
        TagScheme("BIOES", (), single="S", first="B", middle="I", last="E", seqeval_scheme="IOBES"),
        TagScheme("BIOUL", ("BILOU",), single="U", first="B", middle="I", last="L", seqeval_scheme="BILOU"),
    )
}

# The schemes, by their canonical names; `convert_tags` converts between any two.
TAG_SCHEMES = tuple(SCHEMES)
# Other names a scheme goes by.
SCHEME_ALIASES = {alias: scheme.name for scheme in SCHEMES.values() for alias in scheme.aliases}
# Every name a user may give (e.g. `TagLMConfig.tag_scheme`); "BIO" first, the name most users know.
SCHEME_NAMES = (
    "BIO",
    *(name for scheme in SCHEMES.values() for name in (scheme.name, *scheme.aliases) if name != "BIO"),
)
# The tag prefixes each scheme uses.
SCHEME_PREFIXES = {name: scheme.prefixes for name, scheme in SCHEMES.items()}


def canonical_scheme(name: str) -> str:
    """'BIO' -> 'IOB2', 'BILOU' -> 'BIOUL'; the canonical names unchanged; a `ValueError` for anything else."""
    scheme = SCHEME_ALIASES.get(name, name)
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {name!r}; expected one of {SCHEME_NAMES}")
    return scheme


def split_tag(tag: str) -> tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', ''). Raises ValueError for anything else."""
    if tag == "O":
        return "O", ""
    prefix, sep, entity = tag.partition("-")
    if not sep or len(prefix) != 1 or prefix not in PREFIX_ORDER or not entity:
        raise ValueError(f"NER tag {tag!r} is neither 'O' nor '<{'|'.join(PREFIX_ORDER)}>-<type>'")
    return prefix, entity


def is_entity_tag(tag: str) -> bool:
    """Whether `tag` is an entity tag (`O` or `<prefix>-<type>`), which a scheme reads; POS tags (`NN`) are not."""
    try:
        split_tag(tag)
    except ValueError:
        return False
    return True


def tag_set_kind(tags) -> str | None:
    """ "entity" when every tag of `tags` other than `O` is `<prefix>-<type>`, "plain" when none is (a tag set
    without an entity scheme, such as POS tags: scored per token), None when there is no tag but `O`. A set
    that mixes both is a `ValueError` naming one of each."""
    entity = plain = None
    for tag in tags:
        if tag == "O":
            continue
        if is_entity_tag(tag):
            entity = entity or tag
        else:
            plain = plain or tag
        if entity and plain:
            raise ValueError(
                f"the tags mix entity tags ({entity!r}) and tags without an entity scheme ({plain!r}); give one "
                "kind: 'O' and '<prefix>-<type>' tags, or plain tags such as POS"
            )
    return "entity" if entity else "plain" if plain else None


def detect_tag_scheme(tag_sequences) -> str:
    """The scheme whose own prefixes occur ('BIOES' for E-/S-, 'BIOUL' for L-/U-); else 'IOB1' if some entity
    starts with I- (a transition IOB2 forbids), else 'IOB2'. Tags that mix two schemes' own prefixes are a
    ValueError."""
    prefixes, inside_starts = set(), False
    for tags in tag_sequences:
        previous_prefix, previous_entity = "START", ""
        for tag in tags:
            prefix, entity = split_tag(tag)
            prefixes.add(prefix)
            if prefix == "I" and not _is_transition_allowed("IOB2", previous_prefix, previous_entity, prefix, entity):
                inside_starts = True
            previous_prefix, previous_entity = prefix, entity
    marked = [name for name, scheme in SCHEMES.items() if prefixes & (set(scheme.prefixes) - {"B", "I"})]
    if len(marked) > 1:
        raise ValueError(f"the tags mix the prefixes of {' and '.join(marked)}: {''.join(sorted(prefixes - {'O'}))}")
    if marked:
        return marked[0]
    return "IOB1" if inside_starts else "IOB2"


# conlleval's chunk reading knows BIOES's E- and S-; BIOUL's L- and U- are the same roles under other names.
_CONLLEVAL_PREFIX = {"L": "E", "U": "S"}


def _entities(tags: list[str]) -> list[tuple[str, int, int]]:
    """(type, start, end) of each entity of one sentence, read as conlleval reads chunks (in any scheme)."""
    entities, start, previous_prefix, previous_entity = [], None, "O", ""
    for i, tag in enumerate([*tags, "O"]):
        prefix, entity = split_tag(tag)
        prefix = _CONLLEVAL_PREFIX.get(prefix, prefix)
        if start is not None and (
            previous_prefix in ("E", "S") or prefix in ("B", "S", "O") or entity != previous_entity
        ):
            entities.append((previous_entity, start, i))
            start = None
        if start is None and prefix != "O":
            start = i
        previous_prefix, previous_entity = prefix, entity
    return entities


def _write_entities(entities: list[tuple[str, int, int]], length: int, scheme: TagScheme) -> list[str]:
    """One sentence's tags in `scheme` for the entities (type, start, end) of `_entities`."""
    tags, previous_end, previous_entity = ["O"] * length, None, None
    for entity, start, end in entities:
        if end - start == 1:
            prefixes = [scheme.single]
        else:
            prefixes = [scheme.first, *[scheme.middle] * (end - start - 2), scheme.last]
        if scheme.first_after_same_type and (previous_end, previous_entity) == (start, entity):
            prefixes[0] = scheme.first_after_same_type
        tags[start:end] = [f"{prefix}-{entity}" for prefix in prefixes]
        previous_end, previous_entity = end, entity
    return tags


def convert_tags(tags: list[str], source: str, target: str) -> list[str]:
    """Convert one sentence's tags from scheme `source` to scheme `target` (entities stay the same: those
    conlleval reads in `source`). A tag whose prefix `source` does not use is a ValueError."""
    source, target = canonical_scheme(source), canonical_scheme(target)
    if source == target:
        return list(tags)
    for tag in tags:
        prefix, _ = split_tag(tag)
        if prefix != "O" and prefix not in SCHEMES[source].prefixes:
            raise ValueError(f"tag {tag!r} has prefix {prefix!r}, which {source} does not use")
    return _write_entities(_entities(tags), len(tags), SCHEMES[target])


def sort_labels(labels) -> list[str]:
    """'O' first, then by entity type, then by prefix (B, I, E, S, L, U): a stable order for label ids."""

    def key(tag):
        prefix, entity = split_tag(tag)
        return (prefix != "O", entity, PREFIX_ORDER.find(prefix))

    return sorted(set(labels), key=key)


def scheme_labels(tags, scheme: str) -> list[str]:
    """'O' and every label `scheme` has for each entity type among `tags`, in `sort_labels` order.

    The labels of a tagger trained on `tags`: a dev or test set may use a prefix the training data never does
    for a type (training saw only `I-LOC`, the dev set has `B-LOC`), and is then still read.
    """
    prefixes = SCHEME_PREFIXES[canonical_scheme(scheme)]
    types = {entity for entity in (split_tag(tag)[1] for tag in tags) if entity}
    return sort_labels(["O", *(f"{prefix}-{entity}" for entity in types for prefix in prefixes)])


def seqeval_arguments(scheme: str) -> dict:
    """The arguments of seqeval (and of the shipped `seqeval` metric) that score `scheme`: `mode="strict"`
    with seqeval's class for it where the record names one, else none (conlleval's reading)."""
    seqeval_scheme = SCHEMES[canonical_scheme(scheme)].seqeval_scheme
    return {"mode": "strict", "scheme": seqeval_scheme} if seqeval_scheme else {}


def _is_transition_allowed(scheme: str, from_prefix: str, from_entity: str, to_prefix: str, to_entity: str) -> bool:
    """Whether `from -> to` may occur in `scheme` (a canonical name); START and END are the sentence boundaries."""
    record = SCHEMES[scheme]
    if (from_prefix, to_prefix) == ("START", "END"):
        return False  # a sentence has a word
    # An entity that must be closed is open: only its continuation may follow.
    blocked = record.must_close and from_prefix in record.left_open
    continues = to_prefix in record.continues or to_prefix in record.only_after_same_type
    if continues and from_prefix in record.left_open and from_entity == to_entity:
        return True
    # O, the sentence's end, or the start of an entity.
    return (to_prefix in ("O", "END") or to_prefix in record.opens) and not blocked


def allowed_transitions(scheme: str, id2label: dict[int, str]) -> list[tuple[int, int]]:
    """The (from_id, to_id) pairs that `scheme` allows between the labels of `id2label`.

    Id `T` (= len(id2label)) stands for the start of the sentence and `T + 1` for its end, so the result also
    says which tags may begin and end a sentence. Labels are 'O' or '<prefix>-<type>'; the prefixes must belong
    to the scheme (`SCHEME_PREFIXES`: B/I for BIO and IOB1, B/I/E/S for BIOES, B/I/L/U for BIOUL).
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


def continues_entity(previous_tag: str, tag: str, scheme: str) -> bool:
    """Whether the word tagged `tag` continues the entity of the word before it, tagged `previous_tag`, in
    `scheme`: a sentence cut between the two would cut an entity (IOB2 `B-LOC -> I-LOC`; not IOB1's `O -> I-LOC`,
    which starts one, nor its `I-LOC -> B-LOC`, which starts a second)."""
    record = SCHEMES[canonical_scheme(scheme)]
    (from_prefix, from_entity), (to_prefix, to_entity) = split_tag(previous_tag), split_tag(tag)
    return to_prefix in record.continues and from_prefix in record.left_open and from_entity == to_entity


def as_sentence(tags: list[str], scheme: str) -> list[str]:
    """The tags of a piece cut from a longer sentence, rewritten where `scheme` forbids them at a sentence's start
    or end, so that the piece is a sentence of its own (a CRF checks its gold tags): an entity cut at the piece's
    start starts there (IOB2, BIOES, BIOUL `I-X` -> `B-X`; BIOES `E-X` -> `S-X`, BIOUL `L-X` -> `U-X`; IOB1 `B-X`
    -> `I-X`), one cut at its end ends there (BIOES `I-X` -> `E-X`, `B-X` -> `S-X`; BIOUL likewise with `L-`/`U-`).
    Other tags are kept."""
    name = canonical_scheme(scheme)
    record, tags = SCHEMES[name], list(tags)
    if not tags:
        return tags
    prefix, entity = split_tag(tags[0])
    if not _is_transition_allowed(name, "START", "", prefix, entity):
        goes_on = len(tags) > 1 and continues_entity(tags[0], tags[1], name)
        tags[0] = f"{record.first if goes_on else record.single}-{entity}"
    prefix, entity = split_tag(tags[-1])
    if not _is_transition_allowed(name, prefix, entity, "END", ""):
        went_on = len(tags) > 1 and continues_entity(tags[-2], tags[-1], name)
        tags[-1] = f"{record.last if went_on else record.single}-{entity}"
    return tags


def count_scheme_breaks(tag_sequences, scheme: str) -> int:
    """How many transitions of the tag sequences (string tags; the sentence start and end included) `scheme` does
    not allow: e.g. `O -> I-PER` or a sentence starting with `I-PER` under IOB2. A tagger that decodes with a CRF
    under `scheme` predicts none; one that tags each word on its own may."""
    name = canonical_scheme(scheme)
    breaks = 0
    for tags in tag_sequences:
        path = [("START", ""), *(split_tag(tag) for tag in tags), ("END", "")]
        for (from_prefix, from_entity), (to_prefix, to_entity) in zip(path, path[1:]):
            for prefix in (from_prefix, to_prefix):
                if prefix not in ("START", "END", "O") and prefix not in SCHEME_PREFIXES[name]:
                    raise ValueError(f"tag prefix {prefix!r} is not one {scheme} uses ({SCHEME_PREFIXES[name]})")
            breaks += not _is_transition_allowed(name, from_prefix, from_entity, to_prefix, to_entity)
    return breaks
