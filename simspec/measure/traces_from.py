"""``--traces-from``: reused traces (a folder's, or a profile's), checked against the new profile's."""

from __future__ import annotations

from pathlib import Path

from simspec.errors import SimspecError


def traces_source(path: str, target: str, draft: str, dtype: str | None = "fp32", temperature: float = 0.0
                  ) -> tuple[Path, dict, int]:
    """(folder, reference, reach) of existing traces: a traces folder, or a profile's (``dtype`` None:
    any); reach is the longest context their trees were drafted at, root to the deepest level."""
    from simspec.shipped import locate
    from simspec.sim.profile import load_profile
    from simspec.sim.trace_files import load_traces

    folder = locate(path)
    if (folder / "profile.json").is_file():
        profile = load_profile(folder)
        if profile.meta.traces is None:
            raise SimspecError(f"--traces-from {path}: that profile has latency curves only, no traces")
        folder = profile.traces_dir
    traces = load_traces(folder)
    meta = traces.meta
    if meta.target != target or meta.draft != draft:
        raise SimspecError(f"--traces-from {path} holds traces of {meta.target} + {meta.draft}, "
                           f"not {target} + {draft}: pass the matching --target/--draft or record new traces")
    if dtype is not None and meta.dtype != dtype:  # trees drafted in another dtype are other trees
        raise SimspecError(f"--traces-from {path} holds traces recorded in {meta.dtype}, and this profile "
                           f"measures {dtype}: pass --dtype {meta.dtype} or record new traces")
    if traces.temperature != temperature:  # sampled and greedy trees replay by different rules
        raise SimspecError(f"--traces-from {path} holds traces recorded at temperature {traces.temperature:g}, not "
                           f"{temperature:g}: pass --temperature {traces.temperature:g} or record new traces")
    ref = {"content_hash": meta.content_hash, "positions": traces.positions, "n_prompts": traces.n_prompts,
           "prompts": meta.prompts, "depth_max": traces.depth_max, "width": traces.width,
           "temperature": traces.temperature, "draft_fingerprint": meta.draft_fingerprint}
    return folder.resolve(), ref, int(traces.context_length.max(initial=0)) + traces.depth_max
