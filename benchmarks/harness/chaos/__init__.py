"""The chaos soak's parts (benchmarks/chaos.py): the fleet it runs, the load it sends, the faults it
injects, the ledger that accounts for every task, and the timeline it draws."""
