"""The policy's ``instructions:`` section: which items the fixed-work driver runs, and how much.

    instructions:
      block_bytes: 16384      # bytes per call of a symmetric item
      top_functions: 5        # functions listed for a regressed item
      kernel_proxy: false     # kernel targets: count a user-space build of the variant's crypto flags
      kernel_count: false     # QEMU lkcapi and crypto-register variants: count the real module in the guest
      kernel_bytes: 65536     # bytes per counted item in the guest
      kernel_sizes: [16, 1024, 16384]  # bytes per operation: one item per algorithm and size
      flag_drop_pct: 5        # a module's count within its limit that dropped more than this is not
      flag_function_pct: 1    # cleared, nor one that lost a function of at least this share
      items:                  # benchmark item -> bytes (symmetric) or operations (asymmetric)
        AES-128-GCM-enc: 1048576
        RSA 2048 public: 64

The gates are regression rules with ``metric: instructions`` (``policy/instruction_gates.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..perf.instruction_counts import FLAG_DROP_PCT, FLAG_FUNCTION_PCT
from ..support.yaml_reader import At

INSTRUCTIONS = "instructions"  # a regression rule's metric: counted instructions, 1 vs 1
_KEYS = ("items", "block_bytes", "top_functions", "kernel_proxy", "kernel_count", "kernel_bytes",
         "kernel_sizes", "flag_drop_pct", "flag_function_pct")
KERNEL_BYTES = 65536
KERNEL_SIZES = (16, 1024, 16384)
KERNEL_MAX_SIZE = 65536  # the guest harness's buffer
MAX_BLOCK = 1024 * 1024  # the driver's buffer


@dataclass(frozen=True)
class InstructionSettings:
    items: dict[str, int] = field(default_factory=dict)  # name -> bytes or operations
    block_bytes: int = 16384
    top_functions: int = 5
    kernel_proxy: bool = False  # kernel targets counted in a user-space build of their flags
    kernel_count: bool = False  # the real module counted in the guest (QEMU TCG plugin)
    kernel_bytes: int = KERNEL_BYTES
    kernel_sizes: tuple[int, ...] = KERNEL_SIZES
    flag_drop_pct: float = FLAG_DROP_PCT  # a sharper drop is flagged (inconclusive), not cleared
    flag_function_pct: float = FLAG_FUNCTION_PCT  # a function this big gone from the count: flagged

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
    count = f["kernel_count"].boolean() if "kernel_count" in f else False
    kbytes = f["kernel_bytes"].integer(minimum=1) if "kernel_bytes" in f else KERNEL_BYTES
    sizes = KERNEL_SIZES
    if "kernel_sizes" in f:
        sizes = tuple(a.integer(minimum=16) for a in f["kernel_sizes"].sequence())
        if not sizes or len(sizes) > 16:
            raise f["kernel_sizes"].error(f"needs 1 to 16 operation sizes, not {len(sizes)}")
        for size, a in zip(sizes, f["kernel_sizes"].sequence(), strict=True):
            if size % 16 or size > KERNEL_MAX_SIZE:
                raise a.error(f"an operation size must be a multiple of 16 up to {KERNEL_MAX_SIZE}, "
                              f"not {size}")
    drop = f["flag_drop_pct"].number() if "flag_drop_pct" in f else FLAG_DROP_PCT
    share = f["flag_function_pct"].number(positive=True) if "flag_function_pct" in f else FLAG_FUNCTION_PCT
    return InstructionSettings(items, block, top, proxy, count, kbytes, sizes, drop, share)
