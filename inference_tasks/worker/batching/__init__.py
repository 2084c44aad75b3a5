"""Micro-batching: the worker's main process coalesces small embed/classify tasks (batcher.py, tied to
Celery by strategy.py) into one pool job that a child encodes together (batch_job.py); plan.py is the
hand-off between them.
"""
