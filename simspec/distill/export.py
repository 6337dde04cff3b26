"""``simspec export-draft``: an EAGLE-3 head in any layout simspec loads, written in a serving
engine's: ``speculators`` (vLLM loads the folder alone) or ``public`` (SGLang's and vLLM's), fp16,
with simspec's provenance card beside it."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from simspec import __version__, flags
from simspec.engine.formats import draft_help
from simspec.errors import SimspecError
from simspec.flags import opt

LAYOUTS = ("speculators", "public")
# the names servers load the built-in targets by (a speculators config names its verifier)
HUB_IDS = {"smollm2-135m-instruct": "HuggingFaceTB/SmolLM2-135M-Instruct"}


@dataclass(frozen=True, kw_only=True)
class ExportRequest:
    draft: str = flags.draft(draft_help)
    target: str = flags.target()
    layout: str = opt("speculators", "speculators (vLLM's Eagle3Speculator: the folder alone serves) or public "
                      "(the EAGLE-3 layout SGLang and vLLM load).")
    speculative_tokens: int = opt(3, "speculators: the number of draft tokens per step the config proposes "
                                  "(vLLM's num_speculative_tokens).", min=1)
    verifier: str | None = opt(None, "speculators: the target's name as a server loads it (default: the built-in "
                               "target's Hugging Face id, else --target).")
    out: str = flags.out(dataclasses.MISSING)
    force: bool = flags.force()

    def check(self) -> None:
        from simspec.cache import check_out

        if self.layout not in LAYOUTS:
            raise SimspecError(f"unknown --layout {self.layout!r}: choose one of {', '.join(LAYOUTS)}")
        check_out(self.out, self.force)


def run(request: ExportRequest, status) -> dict:
    """Load the head bound to its target, write it; the ``--json`` summary."""
    from simspec.cache import atomic_directory
    from simspec.engine.eagle_checkpoint import save_eagle3
    from simspec.engine.eagle_public import Eagle3Head
    from simspec.engine.load import load_drafter
    from simspec.engine.models import load_model
    from simspec.engine.speculators import save_speculators
    from simspec.shipped import shipped_drafter

    request.check()
    with status(f"loading {request.target} and {request.draft}"):
        target = load_model(request.target)
        drafter = load_drafter(request.draft, target)
    head = getattr(drafter, "head", None)
    if not isinstance(head, Eagle3Head):
        raise SimspecError(f"--draft {request.draft} is not an EAGLE-3 head: export-draft writes EAGLE-3 heads "
                           "(the shipped eagle, a public or speculators checkpoint)")
    source = shipped_drafter(request.draft) or Path(request.draft)
    card = {"exported_by": f"simspec {__version__}", "draft": request.draft, "target": request.target,
            "layout": request.layout}
    if (source / "simspec.json").is_file():
        card["source_card"] = json.loads((source / "simspec.json").read_text())
    with atomic_directory(Path(request.out), replace=request.force) as folder:
        if request.layout == "speculators":
            verifier = request.verifier or HUB_IDS.get(request.target, request.target)
            save_speculators(folder, head, target, card, verifier, request.speculative_tokens)
        else:
            save_eagle3(folder, head, target, card)
    files = sorted(Path(request.out).iterdir())
    return {"out": request.out, "layout": request.layout, "draft": request.draft, "target": request.target,
            "files": [p.name for p in files], "megabytes": sum(p.stat().st_size for p in files) / 1e6}
