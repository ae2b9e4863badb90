"""hf_ctx.tools.paths.check_local_path: a name that is no local folder is refused before any data is loaded, with
one line that says so first; offline the Hub is never asked, online one existence check decides (a fake Hub)."""

import pytest
import run_ner
from huggingface_hub import HfApi, constants

from hf_ctx.tools.argument_checks import check_path_arguments
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.paths import check_local_path


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """The Hub as the test sets it: `hub.models` exist, `hub.reachable` says whether it answers; every question
    asked is recorded in `hub.asked`. The Hub cache is an empty folder."""

    class FakeHub:
        models, reachable, asked = set(), True, []

    def repo_exists(api, repo_id, **kwargs):
        FakeHub.asked.append(repo_id)
        if not FakeHub.reachable:
            raise ConnectionError("Name or service not known")
        return repo_id in FakeHub.models

    monkeypatch.setattr(HfApi, "repo_exists", repo_exists)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return FakeHub


def test_offline_a_missing_folder_is_said_to_be_missing_and_the_hub_is_not_asked(hub, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(FileNotFoundError) as error:
        check_local_path("runs/does-not-exist", "--model_name_or_path")
    assert str(error.value) == (
        "no folder 'runs/does-not-exist' (and the Hub is not tried offline), given for --model_name_or_path"
    )
    assert hub.asked == []


def test_online_a_name_neither_on_disk_nor_on_the_hub_is_refused(hub):
    with pytest.raises(FileNotFoundError) as error:
        check_local_path("runs/does-not-exist", "--tokenizer_name")
    assert str(error.value) == (
        "'runs/does-not-exist' is neither a local folder nor a model on the Hub, given for --tokenizer_name"
    )
    hub.models = {"owner/model"}
    check_local_path("owner/model", "--model_name_or_path")  # on the Hub: transformers downloads it
    assert hub.asked == ["runs/does-not-exist", "owner/model"]
    hub.reachable = False
    with pytest.raises(FileNotFoundError, match=r"^no folder 'owner/model' \(and the Hub could not be reached: "):
        check_local_path("owner/model", "--model_name_or_path")


def test_local_folders_hub_cache_and_paths_that_cannot_be_hub_ids(hub, tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    check_local_path(tmp_path)  # exists
    (tmp_path / "hub-cache" / "models--owner--cached").mkdir(parents=True)
    check_local_path("owner/cached", "--model_name_or_path")  # downloaded before: loads offline
    for path in (str(tmp_path / "missing"), "./missing", "a/b/c"):  # no Hub id has this form: the Hub is never asked
        with pytest.raises(FileNotFoundError, match=rf"^no folder '{path}', given for --config_name$"):
            check_local_path(path, "--config_name")
    assert hub.asked == []


def test_a_size_preset_as_config_name_is_no_path(hub, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    class Arguments:
        config_name, tokenizer_name = "mini", None

    check_path_arguments(Arguments())
    Arguments.tokenizer_name = "mini"  # not a preset of tokenizers
    with pytest.raises(FileNotFoundError, match="^no folder 'mini'"):
        check_path_arguments(Arguments())


def test_a_script_refuses_a_missing_model_folder_before_loading_any_data(hub, monkeypatch, tmp_path, capsys, caplog):
    """The training file is missing too: the folder's error comes first, so no data was read; it is the only
    thing the script says."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    argv = ["--model_name_or_path", "runs/does-not-exist", "--train_file", str(tmp_path / "missing.txt")]
    argv += ["--do_train", "--output_dir", str(tmp_path / "out")]
    with pytest.raises(SystemExit):
        run_script(run_ner.main, argv)
    printed = capsys.readouterr()
    assert (
        caplog.records == []
        and printed.out == ""
        and printed.err
        == (
            "error: no folder 'runs/does-not-exist' (and the Hub is not tried offline), given for --model_name_or_path\n"
        )
    )
