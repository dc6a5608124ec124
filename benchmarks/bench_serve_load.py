"""Load test of `elical serve` (issue 22), on localhost only: a real `elical serve` process (uvicorn, an
API key, the default limits) over a confidence model on the packaged world LM (LoRA + head untrained, as
`elical train` starts them: cost does not depend on the weights), driven by an httpx client in this
process. Prints the machine and:

(a) N `/v1/confidence` requests at C concurrent, a share of them poisoned (a lone surrogate in the
    question, too many questions, a question over the character limit, a body over the byte limit, bad
    JSON): good requests that failed (not 200, or confidences other than the question's own scored
    alone; target 0) and poisoned requests that did not get their 4xx;
(b) latency of one-question requests (from --small-clients clients in a loop) with no other load, and
    while one request of 256 questions x 20,000 characters (the largest the default limits take) runs:
    p50, p99 and max (target: p99 below 1 s), and the large request's own time; also with passes bounded
    by question count only (--batch-tokens 1e9) for comparison;
(c) the server's resident memory after warm-up, after N and after --total requests of (a)'s mix
    (target: flat within 10 % from N to --total).

    python benchmarks/bench_serve_load.py                      # 2-core CPU: about 5 minutes
    python benchmarks/bench_serve_load.py --out benchmarks/results/bench_serve_load_cpu.txt
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

KEY_ENV = "ELICAL_BENCH_SERVE_KEY"
KEY = "bench-" + os.urandom(8).hex()
HEADERS = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
POISONS = ("lone surrogate", "257 questions", "question over 20,000 characters", "body over 8 MiB", "bad JSON")
MIB = 1024 * 1024


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=1000, help="requests of (a)")
    p.add_argument("--concurrency", type=int, default=200, help="requests in flight in (a) and (c)")
    p.add_argument("--poisoned", type=float, default=0.05, help="share of poisoned requests")
    p.add_argument("--total", type=int, default=5000, help="requests after which (c) measures memory again")
    p.add_argument("--small-clients", type=int, default=4, help="one-question clients in (b)")
    p.add_argument("--baseline-seconds", type=float, default=5.0, help="how long (b) measures with no other load")
    p.add_argument("--out", type=Path, default=None, help="also write the printed figures here")
    return p.parse_args(argv)


def machine() -> str:
    """CPU model, cores, load (run_default.machine) and library versions."""
    import torch
    from run_default import machine as cpu

    return f"{cpu()}; torch {torch.__version__}, httpx {httpx.__version__}, Python {platform.python_version()}"


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def world_questions(n: int) -> list[str]:
    """Questions of the embedded world."""
    from elical.world import evaluation_questions, generate_world

    return [e.question for e in evaluation_questions(generate_world())[:n]]


def model_folder(workdir: Path) -> Path:
    """A confidence model folder on the packaged world LM."""
    from elical.model.network import ConfidenceModel, ModelConfig

    folder = workdir / "world-confidence"
    ConfidenceModel.create(ModelConfig(base_model="world-lm"), device="cpu").save(folder)
    return folder


@contextmanager
def server(folder: Path, log: Path, extra: list[str]) -> Iterator[tuple[str, int]]:
    """An `elical serve` process on a free localhost port: (its URL, its pid)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "elical.cli", "serve", str(folder), "--tau", "0.5", "--device", "cpu",
               "--host", "127.0.0.1", "--port", str(port), "--api-key-env", KEY_ENV, "--max-new-tokens", "8", *extra]
    env = {**os.environ, KEY_ENV: KEY, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start:\n{log.read_text()}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


@dataclass
class Request:
    """One request of the mix: its body, and the status it must get (200: a good one)."""

    body: bytes
    status: int
    questions: list[str]
    poison: str | None = None


def good(questions: list[str]) -> Request:
    return Request(json.dumps({"questions": questions}).encode(), 200, questions)


def poisoned(kind: str, question: str) -> Request:
    """A request of the poisoned kind ``kind``, and the status it must get."""
    if kind == "lone surrogate":
        return Request(b'{"questions": ["' + question.encode() + b' \\ud800"]}', 400, [], kind)
    if kind == "257 questions":
        return Request(json.dumps({"questions": [question] * 257}).encode(), 413, [], kind)
    if kind == "question over 20,000 characters":
        return Request(json.dumps({"questions": [question + " x" * 10_000]}).encode(), 400, [], kind)
    if kind == "body over 8 MiB":
        return Request(json.dumps({"questions": [question], "pad": " " * 8 * MIB}).encode(), 413, [], kind)
    return Request(b'{"questions": ["' + question.encode() + b'"', 400, [], kind)


def mix(n: int, share: float, pool: list[str], rng: random.Random) -> list[Request]:
    """``n`` requests, a ``share`` of them poisoned (the kinds in turn), the good ones of 1 to 4 questions."""
    bad = set(rng.sample(range(n), round(n * share)))
    out, turn = [], 0
    for i in range(n):
        if i in bad:
            out.append(poisoned(POISONS[turn % len(POISONS)], rng.choice(pool)))
            turn += 1
        else:
            out.append(good(rng.sample(pool, rng.randint(1, 4))))
    return out


async def send(client: httpx.AsyncClient, request: Request) -> tuple[str, list[float] | None]:
    """(status, confidences) of one request; for a transport error, the error's name as the status."""
    try:
        response = await client.post("/v1/confidence", content=request.body, headers=HEADERS)
    except httpx.HTTPError as err:
        return type(err).__name__, None
    if response.status_code != 200:
        return str(response.status_code), None
    return "200", response.json()["confidences"]


async def run_mix(url: str, requests: list[Request], concurrency: int,
                  reference: dict[str, float]) -> tuple[Counter[str], float]:
    """Send ``requests`` with ``concurrency`` in flight: counts of outcomes, and the wall seconds."""
    outcomes: Counter[str] = Counter()
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def one(client: httpx.AsyncClient, request: Request) -> None:
        async with gate:
            status, scores = await send(client, request)
        if request.poison is not None:
            wrong = "" if status == str(request.status) else f" instead of {request.status}"
            outcomes[f"poisoned ({request.poison}): got {status}{wrong}"] += 1
        elif status != "200":
            outcomes[f"good, failed with {status}"] += 1
        elif scores is None or not np.allclose(scores, [reference[q] for q in request.questions], atol=1e-4):
            outcomes["good, wrong confidences"] += 1
        else:
            outcomes["good, ok"] += 1

    start = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        await asyncio.gather(*(one(client, r) for r in requests))
    return outcomes, time.perf_counter() - start


async def small_latencies(url: str, clients: int, pool: list[str], stop: asyncio.Event,
                          seconds: float | None = None) -> list[float]:
    """Seconds of one-question requests from ``clients`` clients in a loop, until ``stop`` is set (or
    ``seconds`` have passed)."""
    times: list[float] = []

    async def loop(client: httpx.AsyncClient, rng: random.Random) -> None:
        while not stop.is_set():
            start = time.perf_counter()
            response = await client.post("/v1/confidence", json={"questions": [rng.choice(pool)]}, headers=HEADERS)
            response.raise_for_status()
            times.append(time.perf_counter() - start)

    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        tasks = [asyncio.create_task(loop(client, random.Random(i))) for i in range(clients)]
        if seconds is not None:
            await asyncio.sleep(seconds)
            stop.set()
        await asyncio.gather(*tasks)
    return times


async def under_large_request(url: str, clients: int, pool: list[str]) -> tuple[list[float], float, int]:
    """One-question latencies while one request of 256 x 20,000-character questions runs: (latencies,
    the large request's seconds, its status)."""
    rng = random.Random(1)
    large = [(q + " " + " ".join(rng.choices(pool, k=800)))[:20_000] for q in rng.choices(pool, k=256)]
    stop = asyncio.Event()
    small = asyncio.create_task(small_latencies(url, clients, pool, stop))
    await asyncio.sleep(0.5)  # the small clients are running
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        start = time.perf_counter()
        response = await client.post("/v1/confidence", json={"questions": large}, headers=HEADERS)
        seconds = time.perf_counter() - start
    stop.set()
    return await small, seconds, response.status_code


def latency_line(name: str, times: list[float]) -> str:
    p50, p99 = np.percentile(times, [50, 99]) * 1000
    return f"  {name}: {len(times)} requests, p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {max(times) * 1000:.0f} ms"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mix_figures(url: str, pid: int, requests: list[Request], concurrency: int,
                reference: dict[str, float]) -> tuple[Counter[str], int, int, str]:
    """Run ``requests``: (outcomes, good requests failed, poisoned without their 4xx, a line of timings)."""
    server_cpu, client_cpu = cpu_seconds(pid), time.process_time()
    outcomes, wall = asyncio.run(run_mix(url, requests, concurrency, reference))
    server_cpu, client_cpu = cpu_seconds(pid) - server_cpu, time.process_time() - client_cpu
    failed = sum(c for o, c in outcomes.items() if o.startswith("good") and o != "good, ok")
    wrong = sum(c for o, c in outcomes.items() if "instead of" in o)
    timing = (f"{wall:.1f} s, {len(requests) / wall:.0f} requests/s; CPU seconds: server {server_cpu:.1f}, "
              f"this client {client_cpu:.1f}")
    return outcomes, failed, wrong, timing


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"machine: {machine()}")
    pool = world_questions(400)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        folder = model_folder(workdir)
        say("server: elical serve on the packaged world LM (untrained LoRA + head), --device cpu, an API key, "
            "default limits (8 MiB body, 256 questions, 20,000 characters, --batch-tokens 1024)")
        with server(folder, workdir / "server.log", []) as (url, pid):
            reference = {q: httpx.post(f"{url}/v1/confidence", json={"questions": [q]}, headers=HEADERS,
                                       timeout=60).json()["confidences"][0] for q in pool}
            asyncio.run(run_mix(url, mix(200, args.poisoned, pool, rng), args.concurrency, reference))  # warm-up
            memory = {"after warm-up (200 requests)": rss_mib(pid)}

            say(f"\n(a) {args.requests} /v1/confidence requests, {args.concurrency} concurrent, "
                f"{args.poisoned:.0%} poisoned ({', '.join(POISONS)} in turn; good ones: 1 to 4 questions):")
            outcomes, failed, wrong, timing = mix_figures(url, pid, mix(args.requests, args.poisoned, pool, rng),
                                                          args.concurrency, reference)
            memory[f"after {args.requests} more"] = rss_mib(pid)
            for outcome, count in sorted(outcomes.items()):
                say(f"  {outcome}: {count}")
            say(f"  good requests failed: {failed} (target 0); poisoned without their 4xx: {wrong}; {timing}")
            rest = args.total - args.requests
            outcomes, failed, wrong, timing = mix_figures(url, pid, mix(rest, args.poisoned, pool, rng),
                                                          args.concurrency, reference)
            memory[f"after {args.total} (the same mix)"] = rss_mib(pid)
            say(f"  the next {rest} of the same mix: good requests failed {failed}, poisoned without their 4xx "
                f"{wrong}; {timing}")
            for outcome, count in sorted(outcomes.items()):
                say(f"    {outcome}: {count}")

            say(f"\n(b) one-question requests from {args.small_clients} clients in a loop:")
            alone = asyncio.run(small_latencies(url, args.small_clients, pool, asyncio.Event(), args.baseline_seconds))
            say(latency_line("alone", alone))
            times, seconds, status = asyncio.run(under_large_request(url, args.small_clients, pool))
            say(latency_line("during one 256 x 20,000-character request", times) + " (target p99 < 1000 ms)")
            say(f"  the 256-question request: status {status}, {seconds:.1f} s")
            memory["after (b)"] = rss_mib(pid)

            say("\n(c) server resident memory:")
            for when, mib in memory.items():
                say(f"  {when}: {mib:.0f} MiB")
            first, last = memory[f"after {args.requests} more"], memory[f"after {args.total} (the same mix)"]
            say(f"  from {args.requests} to {args.total} requests: {100 * (last - first) / first:+.1f} % "
                "(target within 10 %)")

        with server(folder, workdir / "server-uncapped.log", ["--batch-tokens", "1000000000"]) as (url, _):
            say("\n(b') the same with passes bounded by question count only (--batch-tokens 1000000000: "
                "64 questions a pass):")
            times, seconds, status = asyncio.run(under_large_request(url, args.small_clients, pool))
            say(latency_line("during one 256 x 20,000-character request", times))
            say(f"  the 256-question request: status {status}, {seconds:.1f} s")
    say(f"\nload average at the end: {os.getloadavg()[0]:.2f} (other processes share this machine's cores)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
