"""The benchmark library: workloads, serving targets, the closed-loop runner and its sampler,
percentiles, alternation, and the tables and reports every script prints.

    workload.py      the repo's support tickets as batches of texts (seeded)
    targets.py       what serves: our Celery workers, the HTTP service, Infinity, the in-process ceiling
    runner.py        closed-loop producers, the thread/RSS sampler, CPU and memory of processes
    stats.py         percentiles and latency summaries (one definition for every script)
    alternation.py   the order configurations run in, round by round, so the host's drift hits all alike
    report.py        tables, ratios, the CPU's name, the JSON report
    host.py          CPU placement of servers and harness, clean stop on TERM
    ceiling.py       the in-process ceiling's pool initializer (imported by spawned processes)
    http_service.py  the FastAPI/Uvicorn service this project replaces
"""
