"""Issue 50: what the committed teacher-text store (``real/teacher-text/``) holds, per source:
continuations, generated tokens, shards and their size on disk.

    .venv/bin/python research/scripts/teacher-text.py [real/teacher-text]
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "real/teacher-text")
    shards = sorted(folder.glob("*.jsonl.gz"))
    rows: Counter[str] = Counter()
    tokens: Counter[str] = Counter()
    seen: set[str] = set()
    for shard in shards:
        for line in gzip.open(shard, "rt", encoding="utf-8"):
            record = json.loads(line)
            if record["k"] in seen:
                continue
            seen.add(record["k"])
            source = record.get("s") or "unlabelled"
            rows[source] += 1
            tokens[source] += len(record["c"])
    print(json.dumps({"store": str(folder), "shards": len(shards),
                      "megabytes": sum(s.stat().st_size for s in shards) / 1e6,
                      "continuations": sum(rows.values()), "generated_tokens": sum(tokens.values()),
                      "by_source": {s: {"continuations": rows[s], "generated_tokens": tokens[s]}
                                    for s in sorted(rows)}},
                     indent=1))


if __name__ == "__main__":
    main()
