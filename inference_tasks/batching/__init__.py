"""Micro-batching: the worker's main process coalesces small embed/classify tasks (microbatch.py) into
one pool job that a child encodes together (batch_job.py); plan.py is the hand-off between them.
"""
