"""Reading a user's text files: their lines as UTF-8, and errors that name the file and the line."""

import os


def utf8_lines(f, path: str | os.PathLike):
    """The lines of the open text file `f`; bytes that are not UTF-8 are a ValueError naming `path:line`."""
    try:
        yield from f
    except UnicodeDecodeError as error:
        raise invalid_utf8_error(path, error) from None


def invalid_utf8_error(path: str | os.PathLike, error: UnicodeDecodeError) -> ValueError:
    """A ValueError naming the file and the line of the first bytes that are not UTF-8 (`error` is what
    decoding raised, which knows neither)."""
    with open(path, "rb") as f:
        for line_number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as line_error:
                return ValueError(
                    f"{os.fspath(path)}:{line_number}: not valid UTF-8 ({line_error.reason} at byte "
                    f"{line_error.start} of the line); save the file as UTF-8"
                )
    return ValueError(f"{os.fspath(path)}: not valid UTF-8 ({error}); save the file as UTF-8")
