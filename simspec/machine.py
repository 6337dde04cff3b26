"""The one description of the machine an artifact was made on (stdlib only; torch is consulted
only when the caller has already imported it)."""

from __future__ import annotations

import os
import platform
import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name with its family and model numbers, e.g. 'AMD EPYC (family 25, model 17)':
    virtual machines often show a bare brand for several generations, the numbers tell them apart."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu family", "model") and key not in fields:
                    fields[key] = value.strip()
                if not line.strip() and fields:  # the first processor's block is enough
                    break
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def device_model(device: str = "cpu") -> str:
    """The model name of the device that ran the work: the GPU's for "cuda", else the CPU's."""
    torch = sys.modules.get("torch")
    if device.startswith("cuda") and torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return cpu_model()


def machine(device: str = "cpu") -> str:
    """One line: architecture, cores, device model, torch version and threads (when loaded)."""
    torch = sys.modules.get("torch")
    text = f"{platform.machine()}, {os.cpu_count()} cores ({cpu_model()})"
    if device.startswith("cuda"):
        text += f", {device_model(device)}"
    if torch is not None:
        text += f", torch {torch.__version__}, {torch.get_num_threads()} threads"
    return text


def device_label(device: str = "cpu") -> str:
    """A profile's ``device``: the GPU's name, or 'cpu (...)' (readers test the 'cpu' prefix)."""
    torch = sys.modules.get("torch")
    if device.startswith("cuda"):
        return device_model(device)
    threads = f", {torch.get_num_threads()} torch threads" if torch is not None else ""
    return f"cpu ({platform.machine()}, {os.cpu_count()} cores{threads})"
