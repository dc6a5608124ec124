"""The steps of `elical run`: sequence.py (the Step protocol and the run's steps, in order) and the work of the
train, honesty and retrieval steps (training_step.py, honesty_step.py, retrieval_step.py). Imports nothing itself."""
