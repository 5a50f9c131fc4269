"""The kinds of worker ``bsdkm-ci init`` knows: what a machine can run, as the tags (and targets) its
``workers:`` entry gets. ``init master --worker NAME:KIND`` writes them; the master names a kind
when it says which worker would add the builders it lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

from .workers import PasswordRef, WorkerSpec


@dataclass(frozen=True)
class WorkerKind:
    name: str
    tags: tuple[str, ...]
    targets: tuple[str, ...] | None  # None: what its tags allow
    setup: str | None  # the packaged setup script it needs, under _data/workers/
    what: str

    def spec(self, worker: str) -> WorkerSpec:
        """A worker of this kind named ``worker``, as its ``workers:`` entry reads."""
        return WorkerSpec(worker, PasswordRef("secret", worker), tags=self.tags, targets=self.targets)


# A worker kind is what the machine can run; a FreeBSD machine builds and loads the FreeBSD module
# only, so its userspace builds never land there.
KINDS: dict[str, WorkerKind] = {k.name: k for k in (
    WorkerKind("userspace", ("linux-userspace",), None, None, "userspace builds on Linux"),
    WorkerKind("linux-qemu", ("linux-qemu",), None, "linux-qemu",
               "userspace, the Linux module and FreeBSD kernels in QEMU (Debian 12, amd64)"),
    WorkerKind("freebsd", ("freebsd-amd64",), ("freebsd-kmod",), "freebsd",
               "the FreeBSD module with kldload on a dedicated FreeBSD machine (amd64)"),
)}
DEFAULT_WORKERS = ("linux:userspace",)
