"""Loading the tokenizer a user names, refusing one that would train on nothing.

transformers 5 is lenient where a user wants an error: `AutoTokenizer.from_pretrained` on a folder without tokenizer
files returns a tokenizer holding only its special tokens (BERT: 5), which maps every word to `[UNK]`: training on
it "works" and learns nothing.
"""

import os

from transformers import AutoTokenizer

from .checks import check_local_path


def check_tokenizer_vocabulary(tokenizer, source: str | os.PathLike):
    """Return `tokenizer` if its vocabulary holds more than its special tokens; else raise `ValueError` naming the
    vocabulary files missing from `source` (the folder or Hub id it was loaded from).

    Tokenizers that read characters (ELMo's, which says whether it has a word vocabulary) pass: their words need
    no vocabulary.
    """
    if getattr(tokenizer, "has_word_vocabulary", None) is not None:
        return tokenizer
    special = set(tokenizer.all_special_tokens)
    if any(token not in special for token in tokenizer.get_vocab()):
        return tokenizer
    source = os.fspath(source)
    names = sorted(set(getattr(tokenizer, "vocab_files_names", {}).values()) | {"tokenizer.json"})
    where = (
        f"none of {', '.join(names)} is in {source}"
        if os.path.isdir(source)
        else f"{source} provides none of {', '.join(names)}"
    )
    raise ValueError(
        f"the tokenizer loaded from {source} has no vocabulary, only its {len(special)} special tokens, so every word "
        f"would become {tokenizer.unk_token}: {where}. Point to a folder with the tokenizer files (e.g. "
        "--tokenizer_name), or train one with `hf-ctx train-tokenizer`"
    )


def load_tokenizer(name_or_path: str | os.PathLike, **kwargs):
    """`AutoTokenizer.from_pretrained(name_or_path, **kwargs)`, refusing a missing local path and a tokenizer
    without a real vocabulary (`check_tokenizer_vocabulary`)."""
    check_local_path(name_or_path, "tokenizer")
    return check_tokenizer_vocabulary(AutoTokenizer.from_pretrained(name_or_path, **kwargs), name_or_path)
