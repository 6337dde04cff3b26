"""``--traces-from``: traces a new profile reuses instead of recording them (a traces folder,
or the traces a profile names), checked against the profile's models, dtype and temperature."""

from __future__ import annotations

from pathlib import Path

from simspec.errors import SimspecError


def traces_dtype(meta: dict) -> str:
    """The dtype traces were recorded in (traces from before ``--dtype`` existed: fp32)."""
    return meta.get("dtype", "fp32")


def traces_source(path: str, target: str, draft: str, dtype: str | None = "fp32", temperature: float = 0.0
                  ) -> tuple[Path, dict]:
    """(folder, reference) of existing traces: a traces folder, or the traces a profile names
    (``dtype`` None: any)."""
    from simspec.shipped import locate
    from simspec.sim.profile import load_profile
    from simspec.sim.trace_files import load_traces

    folder = locate(path)
    if (folder / "profile.json").is_file():
        profile = load_profile(folder)
        if not profile.meta.get("traces"):
            raise SimspecError(f"--traces-from {path}: that profile has latency curves only, no traces")
        folder = profile.traces_dir
    traces = load_traces(folder)
    meta = traces.meta
    if meta.get("target") != target or meta.get("draft") != draft:
        raise SimspecError(f"--traces-from {path} holds traces of {meta.get('target')} + {meta.get('draft')}, "
                           f"not {target} + {draft}: pass the matching --target/--draft or record new traces")
    if dtype is not None and traces_dtype(meta) != dtype:  # trees drafted in another dtype are other trees
        raise SimspecError(f"--traces-from {path} holds traces recorded in {traces_dtype(meta)}, and this profile "
                           f"measures {dtype}: pass --dtype {traces_dtype(meta)} or record new traces")
    if traces.temperature != temperature:  # sampled and greedy trees replay by different rules
        raise SimspecError(f"--traces-from {path} holds traces recorded at temperature {traces.temperature:g}, not "
                           f"{temperature:g}: pass --temperature {traces.temperature:g} or record new traces")
    ref = {"content_hash": meta["content_hash"], "positions": traces.positions, "n_prompts": traces.n_prompts,
           "prompts": meta.get("prompts"), "depth_max": traces.depth_max, "width": traces.width,
           "temperature": traces.temperature, "draft_fingerprint": meta.get("draft_fingerprint")}
    return folder.resolve(), ref
