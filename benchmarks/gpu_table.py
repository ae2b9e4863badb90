#!/usr/bin/env python
"""One markdown table of the speed benchmarks' outputs in a folder: `bert_*.txt` (bert_speed.py), `elmo_*.txt`
(elmo_lstm_speed.py), `taglm_*/train_results.json` (run_ner.py), `inductor_*.txt` (inductor_fusion.py). benchmarks/gpu_window.py's checks items write
them (one file per step) and put this table in their summary.

    python benchmarks/gpu_table.py FOLDER

Rows: the GPU tests' summary; each BERT run (transformers and hf_ctx tokens/s, the ratio, peak memory) eager and
compiled; each ELMo LSTM path (tokens/s and speed-up over the AllenNLP-layout reference of the same run); the
TagLM epoch times. A benchmark that did not run is listed as missing rather than left out.
"""

import json
import re
import sys
from pathlib import Path

# bert_speed.py's lines; "hf_ctx+vocab64": its arm with the vocabulary padded (--pad_vocab_size_to_multiple_of).
BERT_LINE = re.compile(
    r"^\s+(eager|compiled)\s+(transformers|hf_ctx(?:\+vocab\d+)?)\s+([\d,]+) tokens/s\s+peak (\S+) GiB"
)
ELMO_LINE = re.compile(r"^(.+?)\s+([\d,]+)\s+([\d.]+)x\s+(\S+)\s+(\S+)$")
# The goals, by BERT run and mode (ratio hf_ctx / transformers) and by ELMo path (x AllenNLP's loop).
BERT_GOALS = {"pretrain": ">= 1.5x", "finetune": ">= 2x", "inference": ">= 1.0x"}
ELMO_GOALS = {
    "hf_ctx clipped": ">= 5",
    "hf_ctx clipped, compiled + CUDA graphs": ">= 5",
    "hf_ctx no clipping (fused LSTM kernel)": ">= 10",
}


def bert_rows(out: Path) -> list[str]:
    rows = []
    for path in sorted(out.glob("bert_*.txt")):
        speeds, peaks = {}, {}
        for line in path.read_text().splitlines():
            match = BERT_LINE.match(line)
            if match:
                mode, name, speed, peak = match.groups()
                speeds[mode, name] = float(speed.replace(",", ""))
                peaks[mode, name] = peak
        run = path.stem.removeprefix("bert_")
        if not speeds:
            rows.append(f"| BERT {run} | | | | | not measured (see {path.name}) |")
            continue
        goal = BERT_GOALS.get(run.split("_")[0], "")
        for (mode, name), ours in speeds.items():
            if name == "transformers" or (mode, "transformers") not in speeds:
                continue
            reference, unpadded = speeds[mode, "transformers"], speeds.get((mode, "hf_ctx"))
            arm = ratio = ""
            if name != "hf_ctx":  # the arm with the vocabulary padded, beside the unpadded hf_ctx of the same run
                arm = f", vocabulary padded to {name.removeprefix('hf_ctx+vocab')}"
                ratio = f" ({ours / unpadded:.3f}x unpadded)" if unpadded else ""
            rows.append(
                f"| BERT {run}, {mode}{arm} | {reference:,.0f} | {ours:,.0f} | **{ours / reference:.2f}x**{ratio} | "
                f"{peaks[mode, 'transformers']} -> {peaks[mode, name]} GiB | {goal} |"
            )
    return rows


def elmo_rows(out: Path) -> list[str]:
    rows = []
    for path in sorted(out.glob("elmo_*.txt")):
        reference = None
        found = False
        for line in path.read_text().splitlines():
            match = ELMO_LINE.match(line.strip())
            if not match:
                if ": not measured" in line:
                    rows.append(f"| ELMo LSTM ({path.stem}) {line.split(':')[0]} | | | | | not measured |")
                continue
            found = True
            name, speed, speedup = match.group(1).strip(), float(match.group(2).replace(",", "")), match.group(3)
            if name.startswith("reference"):
                reference = speed
                continue
            goal = ELMO_GOALS.get(name, "")
            rows.append(
                f"| ELMo LSTM: {name} | {reference:,.0f} (AllenNLP layout) | {speed:,.0f} | "
                f"**{speedup}x** | | {goal} |"
            )
        if not found:
            rows.append(f"| ELMo LSTM ({path.stem}) | | | | | not measured (see {path.name}) |")
    return rows


def taglm_rows(out: Path) -> list[str]:
    rows = []
    for folder in sorted(out.glob("taglm_*")):
        results = folder / "train_results.json"
        if folder.is_dir() and results.is_file():
            metrics = json.loads(results.read_text())
            rows.append(
                f"| TagLM CoNLL epoch, batch {folder.name.removeprefix('taglm_')} | | "
                f"{metrics['train_runtime']:.1f} s ({metrics['train_steps_per_second']:.1f} steps/s) | | | |"
            )
        elif folder.suffix == ".txt" and "missing" in folder.name:
            rows.append(f"| TagLM CoNLL epoch | | | | | {folder.read_text().strip()} |")
    return rows


FUSION_LINE = re.compile(r"^(eval|train) forward (bias \+ GELU|residual \+ LayerNorm): (fused|not fused)$")


def fusion_rows(out: Path) -> list[str]:
    """inductor_fusion.py's verdicts: whether inductor fused bias + GELU and residual + LayerNorm on this device."""
    rows = []
    for path in sorted(out.glob("inductor_*.txt")):
        found = [FUSION_LINE.match(line) for line in path.read_text().splitlines()]
        rows += [f"| inductor, BERT layer {m[1]}: {m[2]} | | {m[3]} | | | |" for m in found if m]
        if not any(found):
            rows.append(f"| inductor, BERT layer | | | | | not measured (see {path.name}) |")
    return rows


def table(out: Path) -> list[str]:
    """The table's lines: header, then the BERT, ELMo and TagLM rows found in `out`."""
    return [
        "| row | reference (transformers / AllenNLP layout) tok/s | hf_ctx | ratio | peak memory | goal |",
        "| --- | --- | --- | --- | --- | --- |",
        *bert_rows(out),
        *elmo_rows(out),
        *taglm_rows(out),
        *fusion_rows(out),
    ]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/gpu_table.py FOLDER")
    print("\n".join(table(Path(sys.argv[1]))))


if __name__ == "__main__":
    main()
