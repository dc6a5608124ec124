"""Several OpenAI-compatible servers behind one backend: which server takes the next request.

The least-loaded server that is up takes it (ties go round robin), each server holds at most
``concurrency`` requests at once, and a request retried after a failure goes to another server when
one is up. A server that fails ``down_after`` requests in a row is left alone for ``down_for``
seconds, then tried again; when every server is down, the one due back first is tried, so a single
server behaves as before (the caller's retries and backoff decide).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Server:
    """One server: its address, HTTP client, requests in flight, failures in a row, when it is back."""

    url: str
    client: Any
    in_flight: int = 0
    failures: int = 0
    down_until: float = 0.0
    sent: int = field(default=0)  # requests this backend sent it (attempts, retries included)


class ServerPool:
    """Hands out servers under a lock: :meth:`acquire` before a request, :meth:`release` after it."""

    def __init__(
        self,
        servers: Sequence[Server],
        concurrency: int,
        down_after: int = 2,
        down_for: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not servers:
            raise ValueError("the openai backend needs at least one server address")
        self.servers = list(servers)
        self.concurrency = max(1, concurrency)
        self.down_after = max(1, down_after)
        self.down_for = down_for
        self.clock = clock
        self._turn = 0
        self._cond = threading.Condition()

    def up(self) -> list[Server]:
        """The servers not marked down now (every one that is due back counts as up)."""
        now = self.clock()
        return [s for s in self.servers if s.down_until <= now]

    def _pick(self, avoid: Collection[Server]) -> Server | None:
        """The server for the next request, or None while every candidate is at its bound."""
        up = self.up() or [min(self.servers, key=lambda s: s.down_until)]  # all down: the one back first
        candidates = [s for s in up if s not in avoid] or up
        free = [s for s in candidates if s.in_flight < self.concurrency]
        if not free:
            return None
        count = len(self.servers)
        self._turn = (self._turn + 1) % count
        return min(free, key=lambda s: (s.in_flight, (self.servers.index(s) - self._turn) % count))

    def acquire(self, avoid: Collection[Server] = ()) -> Server:
        """Reserve a slot on the least-loaded server that is up, preferring one not in ``avoid`` (the
        servers that already failed this request); waits while every candidate is at its bound."""
        with self._cond:
            while (server := self._pick(avoid)) is None:
                self._cond.wait(timeout=0.05)  # a server coming back up notifies no one: look again soon
            server.in_flight += 1
            server.sent += 1
            return server

    def release(self, server: Server, ok: bool) -> None:
        """Free the slot; a failure counts towards marking the server down, a success clears the count."""
        with self._cond:
            server.in_flight -= 1
            if ok:
                server.failures, server.down_until = 0, 0.0
            else:
                server.failures += 1
                if server.failures >= self.down_after:
                    server.down_until = self.clock() + self.down_for
            self._cond.notify_all()
