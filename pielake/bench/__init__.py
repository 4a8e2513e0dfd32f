"""Benchmarks that print numbers: `pielake bench` (the papers' query shapes, `shapes`) and the micro-batch
benchmark (`python -m pielake.bench.microbatch`). Their current figures are in docs/performance.md."""
