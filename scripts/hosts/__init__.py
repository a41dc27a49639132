"""Several hosts on one machine (network namespaces on a private bridge) and Redis Sentinel,
for tests and benchmarks: `network` (hosts, links, partitions, power loss), `stacks` (the
cortex-workers stack spread over hosts, or on Sentinel), `sentinel` (a primary, a replica and
three sentinels), `scenarios` (the runs the tests and `python -m scripts.hosts` make).
See docs/fleet.md."""
