"""What a script's user error looks like to the tests: one line, no traceback."""

import pytest


def one_error_line(capsys, run) -> str:
    """`run()` exits with status 1 and prints one line `error: ...`, no traceback."""
    with pytest.raises(SystemExit) as exit_info:
        run()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
