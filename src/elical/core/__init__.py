"""The bottom layer: user-input errors, atomic file writes, settings fingerprints and contract, YAML and
strict JSON, redaction, provenance, folder locks, the config's choice types and the authors' wordings.

Imports nothing itself: import the module you need (``from elical.core.inputs import InputError``).
"""
