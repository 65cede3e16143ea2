"""Before/after harness for runtime refactors: every output byte of gsr over a fixed set of cases.

    python benchmarks/identity.py capture DIR        # run every case, write its outputs under DIR
    python benchmarks/identity.py compare DIR1 DIR2  # byte-compare two captures, list what differs

Not a test and not timed: it is what a refactor of the runtime (issue 22) runs before it starts and
after each step, to show that every result line, trace, replay, what-if, report, render, ablation and
tuning output is the same byte for byte. The cases:

- every example program that runs without a model, over its data (run, run --no-short-circuit,
  replay, replay --out / --trace-out, what-if under each sibling program, --show, render --item,
  ablate, report, tune);
- every example with `llm` criteria, over a sample of the shipped data, against the fake
  OpenAI-compatible server (tests/fakeserver.py) answering each prompt deterministically (a hash
  of the prompt picks the answer, some answers are invalid or abstain), then replayed;
- the golden version-1 trace (tests/cases/trace), replayed;
- the fuzz corpus's programs (gsr check output);
- generated programs (tests/test_properties.checkable_programs, drawn once with a fixed seed and
  kept in DIR/generated.json so that both captures use the same ones): run against the fake
  server, replayed; and evaluated in process over seeded random judgments (abstentions and
  invalid ones included) by the item interpreter, short-circuit settling and the columnar
  evaluator.

Volatile text (wall times, temporary paths) is normalised before writing; nothing else is.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

KEY = "sk-identity-harness"
ROLES = ("A", "B", "STRONG", "FAST")


def responder(body: dict):
    """A deterministic answer to a chat request: a hash of the prompt picks it from the schema."""
    from fakeserver import prompt_text

    digest = hashlib.sha256((prompt_text(body) + json.dumps(body.get("response_format"), sort_keys=True))
                            .encode()).digest()
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
    if schema is None and isinstance(fmt, dict):
        schema = fmt.get("schema")
    state = {"i": 0}

    def byte() -> int:
        state["i"] += 1
        return digest[state["i"] % len(digest)]

    def example(s):
        if not isinstance(s, dict):
            return {}
        if "const" in s:
            return s["const"]
        if s.get("enum"):
            return s["enum"][byte() % len(s["enum"])]
        for key in ("anyOf", "oneOf"):
            if s.get(key):
                return example(s[key][byte() % len(s[key])])
        typ = s.get("type")
        if isinstance(typ, list):
            typ = typ[byte() % len(typ)]
        if typ == "object" or (typ is None and "properties" in s):
            return {k: example(v) for k, v in (s.get("properties") or {}).items()}
        if typ == "array":
            return [example(s.get("items", {})) for _ in range(int(s.get("minItems", 0) or 0))]
        if typ == "string":
            return "because " + digest.hex()[:8]
        if typ == "integer":
            lo, hi = int(s.get("minimum", 0)), int(s.get("maximum", 10))
            return lo + byte() % (hi - lo + 1)
        if typ == "number":
            lo, hi = float(s.get("minimum", 0.0)), float(s.get("maximum", 1.0))
            return lo + (byte() % 9) / 8 * (hi - lo)
        if typ == "boolean":
            return bool(byte() % 2)
        return None

    if digest[0] < 10:  # about 4%: an answer that does not fit (an invalid judgment)
        return {"answer": "not what was asked"}
    return example(schema) if schema is not None else {"answer": "ok"}


_WALL = re.compile(r'("[a-z_]*_s": ?)[-0-9.e]+')
_TIMES = re.compile(r"\b(in|wall time) \d+(\.\d+)? (s|ms)\b")
_PORT = re.compile(r"127\.0\.0\.1:\d+")
_FILE_HASH = re.compile(r"\(sha256:[0-9a-f]{64}\)")


def norm(text: str) -> str:
    """Volatile text replaced (idempotent: compare applies it again, so older captures stay comparable)."""
    text = _WALL.sub(r"\g<1>0", text)
    text = _TIMES.sub(r"\g<1> <T>", text)
    text = _PORT.sub("127.0.0.1:<PORT>", text)
    return _FILE_HASH.sub("(sha256:<FILE>)", text)


class Harness:
    def __init__(self, out: Path):
        self.out = out
        self.tmp = Path(tempfile.mkdtemp(prefix="gsr-identity-"))
        self.count = 0

    def norm(self, text: str) -> str:
        return norm(text.replace(str(self.tmp), "<TMP>").replace(str(ROOT), "<ROOT>"))

    def gsr(self, name: str, *argv: str, files: tuple[str, ...] = ()) -> None:
        """Run `gsr ARGV` in process; keep its exit status, stdout, stderr and the files it wrote."""
        from gsrlang.cli import main

        so, se = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code
        case = self.out / name
        case.mkdir(parents=True, exist_ok=True)
        (case / "exit").write_text(f"{code}\n")
        (case / "stdout").write_text(self.norm(so.getvalue()))
        (case / "stderr").write_text(self.norm(se.getvalue()))
        for f in files:
            p = self.tmp / f
            data = self.norm(p.read_text(encoding="utf-8", errors="surrogateescape")) if p.exists() else "<absent>\n"
            (case / f.replace("/", "_")).write_text(data, encoding="utf-8", errors="surrogateescape")
        self.count += 1

    def t(self, name: str) -> str:
        return str(self.tmp / name)


def model_free(h: Harness) -> None:
    tc = ROOT / "examples/topical_chat"
    data = str(tc / "data/dev.jsonl")
    common = ["--data", data, "--input-field", "context", "--reference-field", "fact", "--id-field", "id",
              "--label-field", "scores.overall", "-q", "--no-progress"]
    programs = ["overall", "flat", "overall.tunable", "overall.tuned"]
    for p in programs:
        src = str(tc / f"{p}.gsr")
        h.gsr(f"tc/{p}/run", "run", src, *common, "--out", h.t(f"{p}.r.jsonl"), "--trace", h.t(f"{p}.t.jsonl"),
              files=(f"{p}.r.jsonl", f"{p}.t.jsonl"))
        h.gsr(f"tc/{p}/run-full", "run", src, *common, "--no-short-circuit", "--out", h.t(f"{p}.rf.jsonl"),
              "--trace", h.t(f"{p}.tf.jsonl"), files=(f"{p}.rf.jsonl", f"{p}.tf.jsonl"))
        trace = h.t(f"{p}.t.jsonl")
        h.gsr(f"tc/{p}/replay", "replay", trace)
        h.gsr(f"tc/{p}/replay-out", "replay", trace, "--out", h.t(f"{p}.rr.jsonl"), "--trace-out",
              h.t(f"{p}.rt.jsonl"), files=(f"{p}.rr.jsonl", f"{p}.rt.jsonl"))
        h.gsr(f"tc/{p}/replay-out-only", "replay", trace, "--out", h.t(f"{p}.ro.jsonl"), files=(f"{p}.ro.jsonl",))
        h.gsr(f"tc/{p}/show", "replay", trace, "--show", "tc-007")
        for q in programs:
            if q != p:
                h.gsr(f"tc/{p}/whatif-{q}", "replay", trace, "--program", str(tc / f"{q}.gsr"), "--out",
                      h.t(f"{p}.w.{q}.jsonl"), files=(f"{p}.w.{q}.jsonl",))
                h.gsr(f"tc/{p}/whatif-trace-{q}", "replay", trace, "--program", str(tc / f"{q}.gsr"),
                      "--trace-out", h.t(f"{p}.wt.{q}.jsonl"), files=(f"{p}.wt.{q}.jsonl",))
                h.gsr(f"tc/{p}/whatif-show-{q}", "replay", trace, "--program", str(tc / f"{q}.gsr"), "--show",
                      "tc-011")
        h.gsr(f"tc/{p}/render", "render", src, "--trace", trace, "--item", "tc-003", "-T", "dot", "-o",
              h.t(f"{p}.dot"), files=(f"{p}.dot",))
        h.gsr(f"tc/{p}/ablate", "ablate", src, "--trace", trace, "--bootstrap", "50", "--seed", "1", "--json")
        h.gsr(f"tc/{p}/report", "report", h.t(f"{p}.r.jsonl"), "--trace", trace, "-o", h.t(f"{p}.html"),
              "--bootstrap", "50", "--seed", "1", files=(f"{p}.html",))
    h.gsr("tc/tune", "tune", str(tc / "overall.tunable.gsr"), "--trace", h.t("overall.tunable.t.jsonl"),
          "--label-field", "scores.overall", "--folds", "3", "--seed", "1", "--bootstrap", "50",
          "--out", h.t("tuned.gsr"), files=("tuned.gsr",))
    lb = ROOT / "examples/llmbar"
    common = ["--data", str(lb / "data/natural.json"), "--responses", "output_1,output_2", "--label-field",
              "label", "-q", "--no-progress"]
    src = str(lb / "rules_only.gsr")
    h.gsr("llmbar/run", "run", src, *common, "--out", h.t("lb.r.jsonl"), "--trace", h.t("lb.t.jsonl"),
          files=("lb.r.jsonl", "lb.t.jsonl"))
    h.gsr("llmbar/replay-out", "replay", h.t("lb.t.jsonl"), "--out", h.t("lb.rr.jsonl"), "--trace-out",
          h.t("lb.rt.jsonl"), files=("lb.rr.jsonl", "lb.rt.jsonl"))
    h.gsr("llmbar/show", "replay", h.t("lb.t.jsonl"), "--show", "3")
    h.gsr("llmbar/ablate", "ablate", src, "--trace", h.t("lb.t.jsonl"), "--bootstrap", "50", "--seed", "1",
          "--json")
    h.gsr("llmbar/report", "report", h.t("lb.r.jsonl"), "--trace", h.t("lb.t.jsonl"), "-o", h.t("lb.html"),
          "--bootstrap", "50", "--seed", "1", files=("lb.html",))
    golden = ROOT / "tests/cases/trace"
    h.gsr("golden/v1-replay", "replay", str(golden / "topical_chat_v1.jsonl"))
    h.gsr("golden/v1-replay-out", "replay", str(golden / "topical_chat_v1.jsonl"), "--out", h.t("v1.r.jsonl"),
          "--trace-out", h.t("v1.t.jsonl"), files=("v1.r.jsonl", "v1.t.jsonl"))
    h.gsr("golden/v1-whatif", "replay", str(golden / "topical_chat_v1.jsonl"), "--program",
          str(tc / "flat.gsr"), "--out", h.t("v1.w.jsonl"), files=("v1.w.jsonl",))
    for f in sorted((ROOT / "tests/fuzz_corpus/check").glob("*.gsr")):
        h.gsr(f"fuzz/{f.stem}", "check", str(f))


def _pointwise_data(h: Harness, n: int) -> str:
    rows = [json.loads(line) for line in (ROOT / "examples/topical_chat/data/dev.jsonl").read_text().splitlines()[:n]]
    path = h.t(f"pw{n}.jsonl")
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps({"id": r["id"], "input": r["context"][-600:], "response": r["response"],
                                "reference": r["fact"], "label": round(r["scores"]["overall"]),
                                "scores": r["scores"], "notes": {"ok": None if r["id"][-1] in "37" else
                                                                r["id"][-1] in "0246"}}) + "\n")
    return path


def _pairwise_data(h: Harness, n: int) -> str:
    rows = json.loads((ROOT / "examples/llmbar/data/natural.json").read_text())[:n]
    path = h.t(f"pp{n}.jsonl")
    with open(path, "w") as f:
        for i, r in enumerate(rows):
            f.write(json.dumps({"id": f"p{i}", "input": r["input"], "A": r["output_1"], "B": r["output_2"],
                                "label": "first" if r["label"] == 1 else "second", "reference": r["output_1"][:80],
                                "notes": {"ok": [True, False, None][i % 3]}}) + "\n")
    return path


def with_model(h: Harness, programs: list[tuple[str, str]]) -> None:
    from fakeserver import FakeOpenAI

    pw, pp = _pointwise_data(h, 24), _pairwise_data(h, 16)
    with FakeOpenAI(responder) as server:
        env = {f"GSR_ROLE_{r}_BASE_URL": server.base_url for r in ROLES}
        env.update({f"GSR_ROLE_{r}_API_KEY": KEY for r in ROLES})
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            for name, src in programs:
                from gsrlang.lang.check.driver import analyze_file

                program = analyze_file(src).program
                for mode in ("pointwise", "pairwise"):
                    if program is None or getattr(program.readout, mode) is None:
                        continue
                    data = ["--data", pw, "--id-field", "id", "--label-field", "label"] if mode == "pointwise" else \
                        ["--data", pp, "--responses", "A,B", "--id-field", "id", "--label-field", "label"]
                    base = f"{name}.{mode}"
                    args = ["run", src, *data, "--mode", mode, "--model", "fake-model", "--base-url",
                            server.base_url, "--api-key", KEY, "--no-cache", "--concurrency", "1", "-q",
                            "--no-progress", "--reference-field", "reference"] + \
                        (["--input-field", "input", "--response-field", "response"] if mode == "pointwise" else
                         ["--input-field", "input"])
                    h.gsr(f"model/{base}/run", *args, "--out", h.t(f"{base}.r.jsonl"), "--trace",
                          h.t(f"{base}.t.jsonl"), files=(f"{base}.r.jsonl", f"{base}.t.jsonl"))
                    h.gsr(f"model/{base}/run-full", *args, "--no-short-circuit", "--out", h.t(f"{base}.rf.jsonl"),
                          "--trace", h.t(f"{base}.tf.jsonl"), files=(f"{base}.rf.jsonl", f"{base}.tf.jsonl"))
                    for t in ("t", "tf"):
                        trace = h.t(f"{base}.{t}.jsonl")
                        h.gsr(f"model/{base}/replay-{t}", "replay", trace, "--out", h.t(f"{base}.{t}.rr.jsonl"),
                              "--trace-out", h.t(f"{base}.{t}.rt.jsonl"),
                              files=(f"{base}.{t}.rr.jsonl", f"{base}.{t}.rt.jsonl"))
                        h.gsr(f"model/{base}/replay-out-{t}", "replay", trace, "--out",
                              h.t(f"{base}.{t}.ro.jsonl"), files=(f"{base}.{t}.ro.jsonl",))
                    h.gsr(f"model/{base}/ablate", "ablate", src, "--trace", h.t(f"{base}.tf.jsonl"), "--bootstrap",
                          "30", "--seed", "1", "--json")
                    first = "tc-000" if mode == "pointwise" else "p0"
                    h.gsr(f"model/{base}/show", "replay", h.t(f"{base}.t.jsonl"), "--show", first)
                    if not name.startswith("gen"):
                        h.gsr(f"model/{base}/report", "report", h.t(f"{base}.r.jsonl"), "--trace",
                              h.t(f"{base}.t.jsonl"), "-o", h.t(f"{base}.html"), "--bootstrap", "30", "--seed", "1",
                              files=(f"{base}.html",))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def generated_corpus(path: Path, count: int) -> list[str]:
    """`count` generated programs, drawn once (fixed seed) and kept in `path`."""
    if path.exists():
        return json.loads(path.read_text())
    from hypothesis import given, seed, settings
    from hypothesis import strategies as st

    from test_properties import checkable_programs

    texts: list[str] = []

    @seed(22)
    @settings(max_examples=count, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(__import__("hypothesis").HealthCheck))
    @given(checkable_programs())
    def draw(generated):
        if generated[0] not in texts:
            texts.append(generated[0])

    draw()
    path.write_text(json.dumps(texts, indent=0))
    return texts


def in_process(h: Harness, texts: list[str]) -> None:
    """Every generated program over seeded random judgments: item interpreter, settling, columnar."""
    from gsrlang.lang.check.driver import analyze
    from gsrlang.judges.base import Judgment
    from gsrlang.execution.tracetable import table_from_cells
    from gsrlang.semantics.evaluate import Evaluator
    from gsrlang.semantics.compose import Plan
    from gsrlang.execution.executor import check_judgments, finish

    def value(rng, t):
        if t.kind == "bool":
            return rng.random() < 0.5
        if t.kind == "score":
            return rng.choice([float(t.lo), float(t.hi), (t.lo + t.hi) / 2, rng.uniform(t.lo, t.hi),
                               round(rng.uniform(t.lo, t.hi), 1)])
        return rng.choice(t.labels)

    def judgment(rng, t):
        r = rng.random()
        if r < 0.08:
            return Judgment.invalid("no answer")
        if r < 0.2 and t.optional:
            return Judgment.abstained()
        return Judgment.ok(value(rng, t))

    lines = []
    for k, text in enumerate(texts):
        program = analyze(text).program
        if program is None:
            lines.append(f"{k} unchecked")
            continue
        plan = Plan(program)
        for mode in ("pointwise", "pairwise"):
            if getattr(program.readout, mode) is None:
                continue
            cands = ("A",) if mode == "pointwise" else ("A", "B")
            rng = random.Random(f"{k}-{mode}")
            items = [{n.id: tuple(judgment(rng, n.type) for _ in cands) for n in program.criteria}
                     for _ in range(40)]
            for i, judged in enumerate(items):
                values, checked = check_judgments(plan, judged, cands)
                run = finish(plan, mode, None, 0, cands, values, checked)
                lines.append(f"{k} {mode} {i} item {run.status} {run.readout.to_json() if run.readout else None!r} {run.reason!r} "
                             f"{[repr(v) for v in values]!r}")
            table = table_from_cells(program, mode, [(i, None, {key: [(j.status, j.value) for j in v]
                                                                for key, v in judged.items()})
                                                     for i, judged in enumerate(items)])
            for exact in (True, False):
                ev = Evaluator(program).run(table)  # (one readout: exact either way)
                for i in range(len(items)):
                    lines.append(f"{k} {mode} {i} col{int(exact)} {bool(ev.ok[i])} "
                                 f"{[repr(float(x)) for x in ev.sink[i]]!r} {ev.predictions()[i]!r}")
    case = h.out / "generated-in-process"
    case.mkdir(parents=True, exist_ok=True)
    (case / "lines").write_text("\n".join(lines) + "\n")


def capture(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    h = Harness(out)
    try:
        corpus = out / "generated.json"
        for other in sorted(out.parent.glob("*/generated.json")):  # reuse another capture's draw
            if other != corpus and not corpus.exists():
                shutil.copy(other, corpus)
        texts = generated_corpus(corpus, 60)
        model_free(h)
        examples = [(f.parent.name + "-" + f.stem, str(f)) for f in sorted((ROOT / "examples").glob("*/*.gsr"))
                    if f.parent.name not in ("topical_chat", "llmbar") or f.stem == "direct"]
        gen = []
        for k, text in enumerate(texts[:25]):
            p = h.tmp / f"gen{k}.gsr"
            p.write_text(text)
            gen.append((f"gen{k}", str(p)))
        with_model(h, examples + gen)
        in_process(h, texts)
    finally:
        shutil.rmtree(h.tmp, ignore_errors=True)
    print(f"{h.count} gsr commands captured under {out}")


def compare(a: Path, b: Path) -> int:
    fa = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    fb = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    bad = sorted(fa ^ fb)
    for p in bad:
        print(f"only in one capture: {p}")
    def text(p: Path) -> str:
        return norm(p.read_text(encoding="utf-8", errors="surrogateescape"))

    differ = [p for p in sorted(fa & fb) if text(a / p) != text(b / p)]
    for p in differ:
        print(f"differs: {p}")
    print(f"{len(fa & fb) - len(differ)} of {len(fa | fb)} files identical")
    return 1 if bad or differ else 0


if __name__ == "__main__":
    cmd = sys.argv[1:2]
    if cmd == ["capture"] and len(sys.argv) == 3:
        capture(Path(sys.argv[2]))
    elif cmd == ["compare"] and len(sys.argv) == 4:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
