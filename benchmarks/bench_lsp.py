"""Language server latency: from a `didChange` to the `publishDiagnostics` for that version.

Starts `gsr lsp` over stdio (a real pygls client, as an editor would), opens a generated
500-line program and edits it repeatedly, alternating a valid version and one with a type
error (so the checker really runs and the diagnostics really change). Prints the median
and the 90th percentile with the server's default debounce (150 ms) and with no debounce
(`--debounce-ms 0`): the difference is the debounce itself; the figure without it is the
server's own cost (target: under 100 ms). Also prints `analyze()` alone, in process.

    python benchmarks/bench_lsp.py [--runs 25] [--lines 500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient


def generate(lines: int) -> str:
    """A valid program of about `lines` lines: criteria with bodies, rules, reducers, gates, one sink."""
    out = ['rubric generated "A generated rubric for the language server benchmark"', "",
           "task pointwise { scale = 1..5  quantize = round }", "task pairwise { epsilon = 0.05  on_tie = tie }", ""]
    layer, i = [], 0
    while len(out) < lines * 0.6:
        if i % 4 == 3:
            out.append(f"criterion c{i}: Bool = rule.word_count(above: {100 + i})")
            layer.append(f"normalize(c{i})")
        else:
            out += [f"criterion c{i}: Ordinal[1..5] {{", f'  ask "How good is aspect {i} of the response?"',
                    '  level 1 "poor"', '  level 5 "excellent"', "}"]
            layer.append(f"normalize(c{i})")
        i += 1
    out.append("")
    k = 0
    while len(layer) > 1:
        nxt = []
        for j in range(0, len(layer), 3):
            group = layer[j:j + 3]
            weights = ", ".join(str(0.2 + 0.1 * (g % 3)) for g in range(len(group)))
            out.append(f"node n{k} = weighted_mean(items: [{', '.join(group)}], weights: [{weights}])")
            if k % 4 == 0:
                out.append(f"node g{k} = cap(base: n{k}, trigger: c3, at: 0.8)")
                nxt.append(f"g{k}")
            else:
                nxt.append(f"n{k}")
            k += 1
        layer = nxt
    while len(out) < lines - 2:
        out.append(f"# padding comment {len(out)}")
    out += ["", f"sink {layer[0]}"]
    return "\n".join(out) + "\n"


class Client(LanguageClient):
    def __init__(self):
        super().__init__("bench", "1")
        self.waiting: dict[int, asyncio.Future] = {}
        self.counts: list[int] = []

        @self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_publish(params: types.PublishDiagnosticsParams):
            fut = self.waiting.pop(params.version, None)
            if fut is not None and not fut.done():
                self.counts.append(len(params.diagnostics))
                fut.set_result(time.perf_counter())


async def measure(text: str, debounce_ms: int | None, runs: int) -> list[float]:
    client = Client()
    cmd = [sys.executable, "-m", "gsrlang.cli", "lsp"] + ([] if debounce_ms is None else
                                                         ["--debounce-ms", str(debounce_ms)])
    await client.start_io(*cmd)
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
    client.initialized(types.InitializedParams())
    with tempfile.TemporaryDirectory() as tmp:
        uri = (Path(tmp) / "big.gsr").as_uri()
        loop = asyncio.get_running_loop()
        client.waiting[1] = loop.create_future()
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="gsr", version=1, text=text)))
        await asyncio.wait_for(client.waiting.get(1) or asyncio.sleep(0), 30)
        broken = text.replace("normalize(c0)", "c0", 1)  # a type error: Ordinal where a Score goes
        times = []
        for version in range(2, runs + 2):
            new = broken if version % 2 == 0 else text
            fut = client.waiting[version] = loop.create_future()
            start = time.perf_counter()
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=new)]))
            end = await asyncio.wait_for(fut, 30)
            times.append((end - start) * 1000)
            await asyncio.sleep(0.05)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    if set(client.counts[1:]) != {0, 1}:
        raise SystemExit(f"unexpected diagnostics counts {sorted(set(client.counts))}")
    return times


def describe(name: str, times: list[float]) -> str:
    times = sorted(times)
    p90 = times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]
    return f"{name:<42} median {statistics.median(times):7.1f} ms   p90 {p90:7.1f} ms   ({len(times)} changes)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--lines", type=int, default=500)
    args = parser.parse_args(argv)
    text = generate(args.lines)
    from gsrlang.lang.check.driver import analyze

    assert analyze(text).ok, "the generated program must check"
    analyze_times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        analyze(text)
        analyze_times.append((time.perf_counter() - t0) * 1000)
    print(f"program: {text.count(chr(10))} lines, {len(text):,} characters")
    print(describe("analyze() in process", analyze_times))
    without = asyncio.run(measure(text, 0, args.runs))
    print(describe("didChange -> diagnostics, no debounce", without))
    with_debounce = asyncio.run(measure(text, None, args.runs))
    print(describe("didChange -> diagnostics, 150 ms debounce", with_debounce))
    verdict = "ok" if statistics.median(without) < 100 else "SLOWER than the 100 ms target"
    print(f"target: < 100 ms excluding the debounce: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
