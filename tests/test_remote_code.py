"""Saved checkpoints carry their source code (`auto_map` + the .py files they need).

They load with `trust_remote_code=True` in a Python process that cannot import hf_ctx, and without
`trust_remote_code` where hf_ctx is installed, through every Auto class the model family is registered with.
Both loads run in fresh subprocesses (one for all families, per mode) and must give the outputs of the model
that was saved.
"""

import ast
import inspect
import json
import os
import re
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file
from tiny_checkpoints import bert_crf_tagger, bert_pretraining, elmo_bilm, elmo_crf_tagger, taglm

import hf_ctx

# Runs in a subprocess: `python load_checkpoints.py remote|installed JOBS_JSON OUT_PREFIX`. It tokenizes each job's
# sentences with AutoTokenizer and runs the model of every listed Auto class loaded from the checkpoint, saving
# the encodings and outputs (safetensors) and the classes it got (json).
LOADER = r"""
import inspect, json, sys, traceback

mode, jobs, out_prefix = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
if mode == "remote":
    sys.modules["hf_ctx"] = None  # every `import hf_ctx...` now raises ImportError
    try:
        import hf_ctx
    except ImportError:
        pass
    else:
        raise SystemExit("the guard failed: hf_ctx is importable")
else:
    import hf_ctx  # noqa: F401  (registers hf_ctx's classes with the Auto classes)

import torch
import transformers
from safetensors.torch import save_file

trust = True if mode == "remote" else None  # None: what a user gets without passing the argument

def qualname(obj):
    return f"{type(obj).__module__}.{type(obj).__name__}"

def run(module, encoding):
    accepted = inspect.signature(module.forward).parameters
    with torch.no_grad():
        output = module(**{k: v for k, v in encoding.items() if k in accepted})
    return {k: v for k, v in output.items() if isinstance(v, torch.Tensor)}

def load(job):
    name, path = job["name"], job["path"]
    config = transformers.AutoConfig.from_pretrained(path, trust_remote_code=trust)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=trust)
    encoding = tokenizer(job["text"], padding=True, return_tensors="pt")
    encoding.update({key: torch.tensor(value) for key, value in job["extra_inputs"].items()})
    classes[name] = {"AutoConfig": qualname(config), "AutoTokenizer": qualname(tokenizer)}
    for key, value in encoding.items():
        tensors[f"{name}/encoding/{key}"] = value
    for auto_name in job["auto_classes"]:
        model, info = getattr(transformers, auto_name).from_pretrained(
            path, trust_remote_code=trust, output_loading_info=True
        )
        classes[name][auto_name] = qualname(model)
        # A head the checkpoint lacks is freshly initialised: compare the base model it wraps.
        outputs = run(model.eval() if not info["missing_keys"] else model.base_model.eval(), encoding)
        for key, value in outputs.items():
            tensors[f"{name}/{auto_name}/{key}"] = value.contiguous()

tensors, classes = {}, {}
for job in jobs:
    try:
        load(job)
    except Exception:  # reported per model family by the test
        classes[job["name"]] = {"error": traceback.format_exc()[:3000]}
save_file(tensors, out_prefix + ".safetensors")
with open(out_prefix + ".json", "w") as f:
    json.dump(classes, f)
"""

SENTENCES = ["red cat runs fast", "the blue bird sleeps and eats slow"]
# family -> builder of its pretraining (or only) model and tokenizer; and the taggers with a CRF (`use_crf`).
CASES = {
    "bert": bert_pretraining,
    "elmo": elmo_bilm,
    "taglm": taglm,
    "bert_crf": bert_crf_tagger,
    "elmo_crf": elmo_crf_tagger,
}


def extra_inputs(model, tokenizer) -> dict:
    """Inputs beside the tokenizer's that the model reads: a BERT CRF tagger's `word_mask` (the first sub-token of
    each word of SENTENCES), as lists."""
    if not (getattr(model.config, "use_crf", False) and "word_mask" in inspect.signature(model.forward).parameters):
        return {}
    encoding = tokenizer(SENTENCES, padding=True)
    word_ids = [encoding.word_ids(i) for i in range(len(SENTENCES))]
    return {
        "word_mask": [[w is not None and (i == 0 or w != ids[i - 1]) for i, w in enumerate(ids)] for ids in word_ids]
    }


def family_auto_classes(config_class):
    """Every Auto class hf_ctx registers a model of this config class with, by name."""
    return sorted({auto.__name__ for auto, model in hf_ctx._AUTO_MODELS if model.config_class is config_class})


def loaded_auto_classes(name, model):
    """The Auto classes a case's checkpoint is loaded through: every one of its family for a pretraining
    checkpoint; a tagger's own for a tagger (other heads' classifiers have other shapes, BERT's base model a
    pooler the tagger lacks, initialised at random)."""
    if name.endswith("_crf"):
        return ["AutoModelForTokenClassification"]
    return family_auto_classes(type(model.config))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Save one tiny checkpoint per model family, load each in two subprocesses, return everything."""
    root = tmp_path_factory.mktemp("remote_code")
    saved, jobs = {}, []
    for name, build in CASES.items():
        path = root / name
        path.mkdir()
        torch.manual_seed(0)
        model, tokenizer = build(root)
        model.eval()
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        saved[name] = (model, tokenizer, path)
        jobs.append(
            {
                "name": name,
                "path": str(path),
                "text": SENTENCES,
                "auto_classes": loaded_auto_classes(name, model),
                "extra_inputs": extra_inputs(model, tokenizer),
            }
        )
    script = root / "load_checkpoints.py"
    script.write_text(LOADER)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(root / "modules"), TRANSFORMERS_VERBOSITY="error")
    results = {}
    for mode in ("remote", "installed"):
        # cwd is the temporary folder, so the repository is not on the subprocess's path either.
        done = subprocess.run(
            [sys.executable, str(script), mode, json.dumps(jobs), str(root / mode)],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{mode} loader failed:\n{done.stderr[-3000:]}"
        results[mode] = (load_file(root / f"{mode}.safetensors"), json.loads((root / f"{mode}.json").read_text()))
    return saved, results


@pytest.mark.parametrize("name", CASES)
def test_checkpoint_names_every_auto_class_of_the_family(checkpoints, name):
    model, _, path = checkpoints[0][name]
    auto_map = json.loads((path / "config.json").read_text())["auto_map"]
    modeling_file = type(model).__module__.rsplit(".", 1)[-1]
    expected = {
        auto.__name__: f"{modeling_file}.{cls.__name__}"
        for auto, cls in hf_ctx._AUTO_MODELS
        if cls.config_class is type(model.config)
    }
    expected["AutoConfig"] = f"{type(model.config).__module__.rsplit('.', 1)[-1]}.{type(model.config).__name__}"
    assert auto_map == expected, "the family's PreTrainedModel base must mix in hf_ctx.remote_code.AutoMapMixin"


@pytest.mark.parametrize("name", CASES)
def test_copied_source_is_self_sufficient(checkpoints, name):
    """Copied files import each other with single-dot relative imports only, and never hf_ctx."""
    model, _, path = checkpoints[0][name]
    copied = {p.name for p in path.glob("*.py")}
    assert f"{type(model).__module__.rsplit('.', 1)[-1]}.py" in copied
    for file in path.glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1, f"{file.name}: `from {'.' * node.level}{node.module} import` leaves the folder"
                assert f"{node.module}.py" in copied, f"{file.name} imports .{node.module}, which was not copied"
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                modules.append(node.module)
            assert not any(m.split(".")[0] == "hf_ctx" for m in modules), f"{file.name} imports hf_ctx"


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("mode", ["remote", "installed"])
def test_checkpoint_loads_and_gives_the_saved_models_outputs(checkpoints, name, mode):
    (model, tokenizer, _), results = checkpoints[0][name], checkpoints[1]
    tensors, classes = results[mode]
    assert "error" not in classes[name], f"{mode} load of the {name} checkpoint failed:\n{classes[name]['error']}"
    prefix = "transformers_modules." if mode == "remote" else "hf_ctx."
    auto_classes = loaded_auto_classes(name, model)
    # The classes came from the copied source (remote) or from hf_ctx (installed), the right one for each Auto class.
    registered = {
        auto.__name__: cls.__name__ for auto, cls in hf_ctx._AUTO_MODELS if cls.config_class is type(model.config)
    }
    for auto_name in auto_classes:
        assert classes[name][auto_name].startswith(prefix)
        assert classes[name][auto_name].endswith("." + registered[auto_name])
    assert classes[name]["AutoConfig"].startswith(prefix)
    tokenizer_module = type(tokenizer).__module__
    assert classes[name]["AutoTokenizer"].endswith("." + type(tokenizer).__name__)
    if not tokenizer_module.startswith("transformers."):
        assert classes[name]["AutoTokenizer"].startswith(prefix)

    # The tokenizer encodes as the saved one did.
    encoding = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    for key, value in encoding.items():
        torch.testing.assert_close(tensors[f"{name}/encoding/{key}"], value, rtol=0, atol=0)

    # Outputs equal those of the saved model, through the Auto class it was saved as ...
    own_auto = next(auto.__name__ for auto, cls in hf_ctx._AUTO_MODELS if cls is type(model))
    extra = {key: torch.tensor(value) for key, value in extra_inputs(model, tokenizer).items()}
    with torch.no_grad():
        expected = model(**encoding, **extra)
    compared = 0
    for key, value in expected.items():
        if isinstance(value, torch.Tensor):
            torch.testing.assert_close(tensors[f"{name}/{own_auto}/{key}"], value, rtol=1e-5, atol=1e-5)
            compared += 1
    assert compared > 0
    # ... and through every other Auto class, whatever the load path, the same as where hf_ctx is installed.
    if mode == "remote":
        installed = results["installed"][0]
        keys = [k for k in installed if k.startswith(f"{name}/")]
        assert {k.split("/")[1] for k in keys} >= set(auto_classes)
        assert sorted(keys) == sorted(k for k in tensors if k.startswith(f"{name}/"))
        for key in keys:
            torch.testing.assert_close(tensors[key], installed[key], rtol=1e-5, atol=1e-5, msg=key)


def test_transformers_own_tokenizers_are_not_saved_as_remote_code(checkpoints):
    """BERT's tokenizer is transformers' BertTokenizer: it needs no copied source and must not carry any."""
    path = checkpoints[0]["bert"][2]
    tokenizer_config = json.loads((path / "tokenizer_config.json").read_text())
    assert "auto_map" not in tokenizer_config
    assert tokenizer_config["tokenizer_class"] == "BertTokenizer"
    assert not (path / "tokenization_bert.py").exists()


@pytest.mark.parametrize("name", CASES)
def test_a_checkpoint_with_non_finite_weights_refuses_to_load_naming_the_tensor(tmp_path, name):
    import transformers

    from hf_ctx.remote_code import registered_auto_class

    model, _ = CASES[name](tmp_path)
    tensor_name, tensor = next((n, t) for n, t in model.state_dict().items() if t.is_floating_point())
    with torch.no_grad():
        tensor.view(-1)[0] = float("nan")
    model.save_pretrained(tmp_path / "nan")
    message = rf"^{tmp_path / 'nan'}: the weights {re.escape(tensor_name)} hold 1 NaN or infinite value\(s\)[,;]"
    with pytest.raises(ValueError, match=message):
        type(model).from_pretrained(tmp_path / "nan")
    with pytest.raises(ValueError, match=r"hold 1 NaN or infinite value"):
        getattr(transformers, registered_auto_class(type(model))).from_pretrained(tmp_path / "nan")  # the Auto way


def test_a_new_label_count_names_ignore_mismatched_sizes_and_the_flag_keeps_the_other_weights(tmp_path):
    """As transformers' `test_load_with_mismatched_shapes`: a classifier of 2 labels loaded with num_labels=3 is
    a RuntimeError naming the flag and the caller's change (not the checkpoint's files); with the flag, the
    encoder is the checkpoint's and the classifier new."""
    from tiny_checkpoints import bert_sequence_classifier
    from transformers import AutoModelForSequenceClassification

    model, _ = bert_sequence_classifier(tmp_path)
    model.save_pretrained(tmp_path / "two")
    for load in (type(model).from_pretrained, AutoModelForSequenceClassification.from_pretrained):
        with pytest.raises(RuntimeError, match=r"arguments describe \(num_labels=3\).*ignore_mismatched_sizes=True"):
            load(tmp_path / "two", num_labels=3)
    loaded = AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "two", num_labels=3, ignore_mismatched_sizes=True
    )
    assert loaded.config.num_labels == 3 and loaded.classifier.weight.shape[0] == 3
    saved = model.state_dict()
    assert all(torch.equal(t, saved[n]) for n, t in loaded.state_dict().items() if not n.startswith("classifier."))


def test_a_remote_code_copy_of_the_elmo_tokenizer_is_an_elmo_tokenizer_to_the_family_checks():
    """With trust_remote_code=True and hf_ctx installed, the tokenizer is the checkpoint's copy of ElmoTokenizer,
    another class of the same name: TagLM's word-level pipeline refused it ("needs an ElmoTokenizer ...; got
    ElmoTokenizer"). The family checks go by the class name."""
    from hf_ctx import ElmoTokenizer
    from hf_ctx.tools import families

    copy = type("ElmoTokenizer", (), {"has_word_vocabulary": True})()  # not a subclass of hf_ctx's
    assert families.is_elmo_tokenizer(copy) and families.is_elmo_tokenizer(ElmoTokenizer())
    families._check_word_vocabulary(copy, "remote")
    families._check_reads_characters(copy, "remote")
    with pytest.raises(ValueError, match=r"holds a BertTokenizer"):
        families._check_reads_characters(type("BertTokenizer", (), {})(), "folder")
