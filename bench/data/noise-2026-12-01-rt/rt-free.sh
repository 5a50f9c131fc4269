#!/bin/sh
# perf-worker setting under test: no RT bandwidth limit, so a SCHED_FIFO benchmark is never throttled
echo -1 > /proc/sys/kernel/sched_rt_runtime_us
exec chrt -f 50 "$@"
