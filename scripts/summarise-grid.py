"""Merge the chunk files of scripts/lossless-grid.sh into one report and print its summary.

Usage: python scripts/summarise-grid.py CHUNK_DIR OUT.json
(chunks as lossless-grid.sh writes them, CHUNK.json, or gzipped, CHUNK.json.gz, as research/runs keeps them)
"""

import gzip
import json
import sys
from pathlib import Path

chunks = sorted([*Path(sys.argv[1]).glob("*.json"), *Path(sys.argv[1]).glob("*.json.gz")])
reports = [json.loads(gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_text()) for p in chunks]
# chunks carry their drafter's fingerprint (bench-engine's JSON since schema 1): never merge two drafters' runs
fingerprints = {r.get("draft_fingerprint") for r in reports} - {None}
if len(fingerprints) > 1:
    sys.exit(f"summarise-grid: {sys.argv[1]} mixes chunks of {len(fingerprints)} drafters; "
             "rerun it into an empty folder")
prompts = [pid for r in reports for pid in r["prompt_ids"]]
configs = {}
for report in reports:
    for c in report["configs"]:
        key = (c["depth"], c["width"], c["size"])
        row = configs.setdefault(key, {"depth": key[0], "width": key[1], "size": key[2], "prompts": 0,
                                       "exact": 0, "divergences": []})
        row["prompts"] += report["n_prompts"]
        row["exact"] += report["n_prompts"] - len(c["divergences"])
        row["divergences"] += c["divergences"]
summary = {
    "draft": reports[0]["draft"], "draft_fingerprint": next(iter(fingerprints), None),
    "device_model": reports[0].get("device_model"), "max_new_tokens": reports[0]["max_new_tokens"],
    "batch_size": reports[0].get("batch_size", 1), "runtime": reports[0].get("runtime", "eager"), "prompts": prompts,
    "n_prompts": len(prompts), "configs": list(configs.values()),
    "runs": sum(r["prompts"] for r in configs.values()),
    "runs_equal_to_greedy": sum(r["exact"] for r in configs.values()),
    "divergences": [d for r in configs.values() for d in r["divergences"]],
}
Path(sys.argv[2]).write_text(json.dumps(summary, indent=1))
print(f"{summary['n_prompts']} prompts ({sum(p.startswith('humaneval') for p in prompts)} HumanEval, "
      f"{sum(p.startswith('sharegpt') for p in prompts)} ShareGPT) x {len(configs)} distinct trees = "
      f"{summary['runs']} runs; equal to greedy: {summary['runs_equal_to_greedy']}; "
      f"divergences: {len(summary['divergences'])}")
for d in summary["divergences"]:
    print(" ", d)
