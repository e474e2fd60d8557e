"""Several hosts on one machine, each with an address of its own (issue 24's test): network
namespaces joined to a bridge by veth pairs (iproute2).

`Network.make(n)` makes a bridge in the test's own namespace (its address: where the
scripted server listens) and `n` namespaces, each with one end of a veth pair and its own
address on the bridge's /24; `prefix(i)` runs a command in the i-th. Every name carries a
random tag, so runs side by side never meet; `remove()` deletes what it made (the veth pairs
go with their namespaces). `Network.why_not()` says why the machine cannot (not root, no
`ip`, no namespaces): the test then skips, saying so. Only what this module made is ever
touched.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@dataclass
class Network:
    tag: str
    subnet: str  # "10.213.N"
    namespaces: list[str] = field(default_factory=list)
    bridge: str = ""

    @property
    def server_address(self) -> str:
        return f"{self.subnet}.1"

    def address(self, i: int) -> str:
        return f"{self.subnet}.{10 + i}"

    def prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.namespaces[i]]

    @staticmethod
    def why_not() -> str | None:
        if os.geteuid() != 0:
            return "network namespaces need root"
        if shutil.which("ip") is None:
            return "no `ip` (iproute2)"
        probe = f"tdprobe{secrets.token_hex(3)}"
        try:
            _ip("netns", "add", probe)
        except (OSError, subprocess.CalledProcessError) as exc:
            return f"cannot make a network namespace: {exc}"
        _ip("netns", "del", probe)
        return None

    @classmethod
    def make(cls, n: int) -> Network:
        tag = secrets.token_hex(2)
        net = cls(tag=tag, subnet=f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}")
        try:
            net.bridge = f"tdbr{tag}"
            _ip("link", "add", net.bridge, "type", "bridge")
            _ip("addr", "add", f"{net.server_address}/24", "dev", net.bridge)
            _ip("link", "set", net.bridge, "up")
            for i in range(n):
                ns, outer, inner = f"td{tag}h{i}", f"td{tag}a{i}", f"td{tag}b{i}"
                _ip("netns", "add", ns)
                net.namespaces.append(ns)
                _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
                _ip("link", "set", inner, "netns", ns)
                _ip("link", "set", outer, "master", net.bridge)
                _ip("link", "set", outer, "up")
                _ip("-n", ns, "addr", "add", f"{net.address(i)}/24", "dev", inner)
                _ip("-n", ns, "link", "set", inner, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            net.remove()
            raise
        return net

    def remove(self) -> None:
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.namespaces.clear()
        if self.bridge:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)
            self.bridge = ""
