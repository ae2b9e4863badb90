#!/usr/bin/env python
"""Regenerate the results tables of README.md and docs/results.md from the per-seed JSON in docs/results/, so
that every number a reader sees comes from a file anyone can recompute the claims from.

    python examples/experiments/render_results.py           # rewrite the tables in place
    python examples/experiments/render_results.py --check   # exit 1, naming the blocks, if any is out of date

A generated block sits between two HTML comments (invisible on GitHub); the first names the JSON (an experiment's
`results.json`, see experiment_lib.write_results_json) and the tables, by title:

    <!-- table docs/results/elmo_taglm_cpu.json "Few labels: 1% of eng.train (140 sentences), eng.testa entity F1" -->
    ...one table per seed: each seed's value, mean (min–max), the baseline, the verdicts...
    <!-- end -->

    <!-- summary docs/results/elmo_taglm_cpu.json "Title 1" "Title 2" -->
    ...one line per table, one column per model: mean (min–max), and the verdict of the table's first comparison
    of that model (its control: "better" / "worse" only where every seed is above / below every control seed)...
    <!-- end -->

    <!-- perplexity docs/results/elmo_taglm_cpu.json -->
    ...the biLM stages' perplexity on eng.testa beside the unigram models (elmo_taglm.py's "perplexity" record)...
    <!-- end -->
"""

import argparse
import json
import re
import sys
from pathlib import Path

from experiment_lib import are_counts, markdown_table, mean_min_max, perplexity_markdown, verdict_word

from hf_ctx.data.atomic_write import write_text
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs/results.md")
BLOCK = re.compile(r'(<!-- (table|summary|perplexity) (\S+\.json)((?: "[^"]+")*) -->\n)(.*?)(<!-- end -->)', re.DOTALL)
SHORT_VERDICT = {
    "better": "**better**",
    "worse": "**worse**",
    "no clear difference": "no clear difference",
}  # bold: a claim


def find_tables(json_path: Path, titles: list[str]) -> list[dict]:
    """The tables of `json_path` with these titles, in this order; an error names a title it does not hold."""
    tables = {table["title"]: table for table in json.loads(json_path.read_text(encoding="utf-8"))["tables"]}
    missing = [title for title in titles if title not in tables]
    if missing:
        raise ValueError(f"{json_path}: no table titled {missing[0]!r} (it has {sorted(tables)})")
    return [tables[title] for title in titles]


def summary_table(tables: list[dict]) -> str:
    """One line per table, a column per model (the first table's models, in its order) and the baseline."""
    models = list(tables[0]["rows"])
    lines = ["| table | " + " | ".join(models) + " | majority class |", "|" + " --- |" * (len(models) + 2)]
    for table in tables:
        controls = {}  # each model's first comparison: the one against its control
        for pretrained, control in table["comparisons"]:
            controls.setdefault(pretrained, control)
        cells = []
        for model in models:
            values = table["rows"][model]
            cell = mean_min_max(values, are_counts(table["rows"]))
            if model in controls:
                cell += f": {SHORT_VERDICT[verdict_word(values, table['rows'][controls[model]])]}"
            cells.append(cell)
        baseline = ("{:,.0f}" if are_counts(table["rows"]) else "{:.4f}").format(table["baseline"][1])
        lines.append(f"| {table['title']} | " + " | ".join(cells) + f" | {baseline} |")
    return "\n".join(lines) + "\n"


def render(text: str, root: Path = ROOT) -> str:
    """`text` with every generated block redrawn from its JSON."""

    def redraw(match: re.Match) -> str:
        opening, kind, json_name, titles, _, closing = match.groups()
        if kind == "perplexity":  # the biLM stages' perplexity table of an ELMo experiment
            record = json.loads((root / json_name).read_text(encoding="utf-8"))
            if "perplexity" not in record:
                raise ValueError(f"{json_name}: no perplexity record (an elmo_taglm.py results.json has one)")
            return f"{opening}{perplexity_markdown(record['perplexity'], heading='####')}{closing}"
        tables = find_tables(root / json_name, re.findall(r'"([^"]+)"', titles))
        body = (
            "\n".join(markdown_table(table, heading="####") for table in tables)
            if kind == "table"
            else summary_table(tables)
        )
        return f"{opening}{body}{closing}"

    return BLOCK.sub(redraw, text)


def main(argv=None) -> int:
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only say which documents are out of date")
    args = parser.parse_args(argv)
    stale = []
    for name in DOCUMENTS:
        path = ROOT / name
        text = path.read_text(encoding="utf-8")
        redrawn = render(text)
        if redrawn != text:
            stale.append(name)
            if not args.check:
                write_text(path, redrawn)
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; run python examples/experiments/render_results.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
