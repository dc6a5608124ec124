"""Scores joined with records (evaluate), the evaluation's settings (config) and paired differences.

Imports nothing itself: import the module you need (``from elical.evaluation.evaluate import evaluate``).
"""
