"""``toy-qemu``: a third OS in QEMU as an outside package adds it, one folder and one entry point.

The guest is a few hundred bytes of code QEMU loads as a multiboot image: its program prints the
harness's markers, runs a toy module's self-test and counts the module's work for the counting
plugin, as Linux's ``/init`` and FreeBSD's ``kldinit`` do for wolfSSL's module.
"""

from buildbot_bsdkm.targets import TargetFacts

FACTS = TargetFacts("toy-qemu", "toy", perf_measurement=False, bench_repeats=False,
                    perf_note="a toy guest under QEMU TCG", emulated=True)
