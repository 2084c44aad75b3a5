"""Operator tools: the `inference-tasks` CLI, doctor, status, the Prometheus exporter, bulk jobs and
the guard that keeps Flower off public interfaces unless it has a password.
"""
