"""The policy's ``bisect:`` section: how much evidence ``bsdkm-ci bisect`` needs before it names a commit.

    bisect:
      k: 1          # the culprit fails k more times and its parent passes k times
      flaky_k: 3    # the same for a failure seen to be flaky, and the passes that make a step good
"""

from __future__ import annotations

from dataclasses import dataclass

from ..support.yaml_reader import At

_KEYS = ("k", "flaky_k")


@dataclass(frozen=True)
class BisectPolicy:
    k: int = 1
    flaky_k: int = 3


def read_bisect_settings(at: At) -> BisectPolicy:
    f = at.mapping(_KEYS)
    return BisectPolicy(k=f["k"].integer(minimum=1) if "k" in f else 1,
                        flaky_k=f["flaky_k"].integer(minimum=1) if "flaky_k" in f else 3)
