"""Store the prompts' token ids in trace folders recorded before traces held them.

The token ids are what `calibrate` renders for each prompt id (the target's chat template);
each prompt's length must equal the length the traces recorded, or the folder is left alone.
The content hash does not cover them (see simspec.sim.traces.DERIVED_ARRAYS), so profiles and
policies built on the traces stay valid.

    .venv/bin/python scripts/add-prompt-tokens.py calibration/traces-humaneval-eagle \
        calibration/traces-humaneval-eagle-T1
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from simspec.data import load_prompts, render_chat
from simspec.engine.models import load_model
from simspec.sim.trace_files import load_traces, save_traces


def main(folders: list[str]) -> None:
    tokenizers = {}
    for folder in folders:
        traces = load_traces(Path(folder))
        meta = traces.meta
        if meta["target"] not in tokenizers:
            tokenizers[meta["target"]] = load_model(meta["target"]).tokenizer
        by_id = {p.id: p for p in load_prompts(meta["prompts"])}
        ids = [render_chat(tokenizers[meta["target"]], by_id[i].text) for i in meta["prompt_ids"]]
        lengths = [len(i) for i in ids]
        if lengths != traces.prompt_lengths.tolist():
            raise SystemExit(f"{folder}: rendered prompt lengths differ from the recorded ones; left alone")
        before = meta["content_hash"]
        traces.prompt_tokens = np.concatenate([np.asarray(i, np.int32) for i in ids])
        meta = {k: v for k, v in meta.items() if k not in ("schema", "schema_version", "content_hash", "positions",
                                                            "n_prompts")}
        traces.meta = meta
        after = save_traces(Path(folder), traces)
        assert after == before, (folder, before, after)
        print(f"{folder}: {len(traces.prompt_tokens)} prompt tokens stored, hash {after} unchanged")


if __name__ == "__main__":
    main(sys.argv[1:])
