"""The policy's ``instructions:`` section: which items the fixed-work driver runs, and how much.

    instructions:
      block_bytes: 16384      # bytes per call of a symmetric item
      top_functions: 5        # functions listed for a regressed item
      kernel_proxy: false     # kernel targets: count a user-space build of the variant's crypto flags
      items:                  # benchmark item -> bytes (symmetric) or operations (asymmetric)
        AES-128-GCM-enc: 1048576
        RSA 2048 public: 64

The gates are regression rules with ``metric: instructions`` (``policy/instructions.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..support.yaml_reader import At

INSTRUCTIONS = "instructions"  # a regression rule's metric: counted instructions, 1 vs 1
_KEYS = ("items", "block_bytes", "top_functions", "kernel_proxy")
MAX_BLOCK = 1024 * 1024  # the driver's buffer


@dataclass(frozen=True)
class InstructionSettings:
    items: dict[str, int] = field(default_factory=dict)  # name -> bytes or operations
    block_bytes: int = 16384
    top_functions: int = 5
    kernel_proxy: bool = False  # kernel targets counted in a user-space build of their flags

    @property
    def enabled(self) -> bool:
        return bool(self.items)


def read_instruction_settings(at: At) -> InstructionSettings:
    f = at.mapping(_KEYS)
    items: dict[str, int] = {}
    if "items" in f and not f["items"].is_null():
        for name, amount in f["items"].mapping().items():
            if not name.strip() or "=" in name or "@" in name:
                raise amount.name_error(f"bad item name {name!r} (a benchmark item name, without '=' or '@')")
            items[name] = amount.integer(minimum=1)
    block = f["block_bytes"].integer(minimum=1) if "block_bytes" in f else 16384
    if block > MAX_BLOCK:
        raise f["block_bytes"].error(f"must be at most {MAX_BLOCK} (the driver's buffer), not {block}")
    top = f["top_functions"].integer(minimum=1) if "top_functions" in f else 5
    proxy = f["kernel_proxy"].boolean() if "kernel_proxy" in f else False
    return InstructionSettings(items, block, top, proxy)
